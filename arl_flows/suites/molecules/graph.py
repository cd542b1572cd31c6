"""A learned surrogate component: a message-passing network on the molecular graph.

The per-pattern linear model of :mod:`.surrogate` sees a molecule through its
lower tiers' values and 64 folded fingerprint bits, which is too little to
tell, say, the few ammonium zwitterions whose gap both lower tiers misjudge
by 2-4 eV from the many whose gap they get right. With a history of
thousands of top-tier answers, a graph network that reads the whole molecule
*and* the lower tiers' values (delta learning: Ramakrishnan et al., J. Chem.
Theory Comput. 11, 2087 (2015)) predicts the top-tier value far better.

:class:`GraphModel` is an edge-conditioned message-passing network (Gilmer et
al., *Neural Message Passing for Quantum Chemistry*, ICML 2017) over heavy
atoms with a heteroscedastic Gaussian head (mean and log-std, trained on the
Gaussian negative log-likelihood). Lower-tier values enter at the readout
with a mask, and training hides tiers at random, so one network serves every
pattern of observed tiers. It runs on the CPU in a few minutes for 10^4
molecules; :class:`verifiers.scheduler.Surrogate` stacks its prediction under
the calibrated linear model (see ``Surrogate.attach_learned``).
"""

from __future__ import annotations

import copy
import hashlib
import math
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from storage.settings import settings

# torch and rdkit (heavy, optional for a worker that only reads features) are imported in the
# functions that use them.
__all__ = ["GraphModel", "GraphModelConfig", "fitted_model", "mol_graph"]

_ELEMENTS = ("C", "N", "O", "F", "S", "Cl", "P", "Br")
_HYBRID = ("SP", "SP2", "SP3")
_BOND = ("SINGLE", "DOUBLE", "TRIPLE", "AROMATIC")
ATOM_DIM = len(_ELEMENTS) + 1 + 5 + 3 + 5 + len(_HYBRID) + 1 + 1 + 4
BOND_DIM = len(_BOND) + 2 + 4


def _one_hot(value: object, choices: Sequence[object]) -> list[float]:
    return [float(value == c) for c in choices]


def mol_graph(smiles: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Heavy-atom graph of a SMILES: atom features, directed edge index (2, E), edge features; None if unparsable."""
    from rdkit import Chem, rdBase

    from arl_flows.suites.molecules.chemistry import KEY_PARSE_LIMIT

    with rdBase.BlockLogs():  # longer text than a candidate's key parse is never a valid molecule: not parsed
        mol = Chem.MolFromSmiles(smiles) if smiles and len(smiles) <= KEY_PARSE_LIMIT else None
    if mol is None or mol.GetNumHeavyAtoms() == 0:
        return None
    ring = mol.GetRingInfo()
    atoms = []
    for a in mol.GetAtoms():
        symbol = a.GetSymbol()
        atoms.append(
            _one_hot(symbol, _ELEMENTS)
            + [float(symbol not in _ELEMENTS)]
            + _one_hot(min(a.GetDegree(), 4), range(5))
            + _one_hot(a.GetFormalCharge(), (-1, 0, 1))
            + _one_hot(min(a.GetTotalNumHs(), 4), range(5))
            + _one_hot(str(a.GetHybridization()), _HYBRID)
            + [float(a.GetIsAromatic()), float(a.IsInRing())]
            + [float(ring.IsAtomInRingOfSize(a.GetIdx(), k)) for k in (3, 4, 5, 6)]
        )
    src, dst, feats = [], [], []
    for b in mol.GetBonds():
        i, j = b.GetBeginAtomIdx(), b.GetEndAtomIdx()
        f = (
            _one_hot(str(b.GetBondType()), _BOND)
            + [float(b.GetIsConjugated()), float(b.IsInRing())]
            + [float(ring.IsBondInRingOfSize(b.GetIdx(), k)) for k in (3, 4, 5, 6)]
        )
        src += [i, j]
        dst += [j, i]
        feats += [f, f]
    edge_index = np.array([src, dst], dtype=np.int64).reshape(2, -1)
    edge_feats = np.array(feats, dtype=np.float32).reshape(-1, BOND_DIM)
    return np.array(atoms, dtype=np.float32), edge_index, edge_feats


@contextmanager
def _torch_threads(n: int) -> Iterator[None]:
    """Run torch on ``n`` threads inside the block (verifier workers may share the cores), then restore."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


@dataclass(frozen=True)
class GraphModelConfig:
    """Size and training schedule of the network (defaults: ~10^5 parameters, a few CPU-minutes on 10^4 molecules)."""

    hidden: int = 96
    layers: int = 4
    epochs: int = 60
    batch_size: int = 64
    lr: float = 2e-3
    weight_decay: float = 1e-5
    hide_tier_prob: float = 0.25  # chance of hiding each lower tier from a training example (per epoch)
    members: int = 3  # a deep ensemble (Lakshminarayanan et al., NeurIPS 2017): seeds differ, predictions averaged
    seed: int = 0
    threads: int = 1


class GraphModel:
    """Predicts the top-tier value from the molecular graph and whichever lower-tier values are known.

    ``tiers`` names the lower tiers in ladder order; ``fit`` and ``predict`` take
    their values as an ``(n, len(tiers))`` array with NaN where a tier did not answer.
    """

    def __init__(self, tiers: Sequence[str], config: GraphModelConfig | None = None) -> None:
        self.tiers = list(tiers)
        self.config = config or GraphModelConfig()
        self._nets: list = []
        self._stats: dict[str, np.ndarray] = {}
        self.history: list[float] = []

    # -- data ---------------------------------------------------------------
    def _graphs(self, smiles: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        empty = (np.zeros((1, ATOM_DIM), np.float32), np.zeros((2, 0), np.int64), np.zeros((0, BOND_DIM), np.float32))
        return [mol_graph(s) or empty for s in smiles]

    def _globals(self, values: np.ndarray) -> np.ndarray:
        """Per tier: standardized value (0 if missing), its square, and a known flag."""
        values = np.asarray(values, dtype=np.float64).reshape(len(values), len(self.tiers))
        known = np.isfinite(values)
        z = np.where(known, (values - self._stats["v_mean"]) / self._stats["v_std"], 0.0)
        return np.concatenate([z, z**2 / 4.0, known.astype(float)], axis=1).astype(np.float32)

    @staticmethod
    def _batch(graphs: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]]):  # noqa: ANN205 - torch tensors
        import torch

        x, ei, ef, owner = [], [], [], []
        offset = 0
        for k, (a, e, f) in enumerate(graphs):
            x.append(a)
            ei.append(e + offset)
            ef.append(f)
            owner.append(np.full(len(a), k, dtype=np.int64))
            offset += len(a)
        return (
            torch.from_numpy(np.concatenate(x)),
            torch.from_numpy(np.concatenate(ei, axis=1)),
            torch.from_numpy(np.concatenate(ef)),
            torch.from_numpy(np.concatenate(owner)),
        )

    # -- model --------------------------------------------------------------
    def _build(self):  # noqa: ANN202
        import torch
        from torch import nn

        h, n_glob = self.config.hidden, 3 * len(self.tiers)

        class Net(nn.Module):
            def __init__(self, layers: int) -> None:
                super().__init__()
                self.embed = nn.Linear(ATOM_DIM, h)
                self.edge = nn.ModuleList([nn.Linear(BOND_DIM, h) for _ in range(layers)])
                self.msg = nn.ModuleList([nn.Linear(h, h) for _ in range(layers)])
                self.upd = nn.ModuleList(
                    [nn.Sequential(nn.Linear(2 * h, h), nn.SiLU(), nn.Linear(h, h)) for _ in range(layers)]
                )
                self.head = nn.Sequential(
                    nn.Linear(2 * h + n_glob, h), nn.SiLU(), nn.Linear(h, h), nn.SiLU(), nn.Linear(h, 2)
                )

            def forward(self, x, ei, ef, owner, n_graphs, glob):  # noqa: ANN001, ANN202
                hv = torch.nn.functional.silu(self.embed(x))
                for edge, msg, upd in zip(self.edge, self.msg, self.upd):
                    m = msg(hv)[ei[0]] * torch.sigmoid(edge(ef))
                    agg = torch.zeros_like(hv).index_add_(0, ei[1], m)
                    hv = hv + upd(torch.cat([hv, agg], dim=1))
                total = torch.zeros(n_graphs, hv.shape[1]).index_add_(0, owner, hv)
                count = torch.zeros(n_graphs).index_add_(0, owner, torch.ones(len(owner))).clamp(min=1)
                out = self.head(torch.cat([total / 10.0, total / count[:, None], glob], dim=1))
                return out[:, 0], out[:, 1].clamp(-6.0, 3.0)

        return Net(self.config.layers)

    def fit(self, smiles: Sequence[str], values: np.ndarray, target: np.ndarray, progress=None) -> GraphModel:  # noqa: ANN001
        """Train from scratch on ``(smiles, lower-tier values, top-tier value)`` triples."""
        import torch

        cfg = self.config
        values = np.asarray(values, dtype=np.float64).reshape(len(smiles), len(self.tiers))
        target = np.asarray(target, dtype=np.float64)
        if len(smiles) != len(target) or len(smiles) < 10:
            raise ValueError(f"GraphModel.fit needs at least 10 aligned examples, got {len(smiles)} / {len(target)}")
        v_mean = np.array([np.nanmean(c) if np.isfinite(c).any() else 0.0 for c in values.T])
        v_std = np.array([np.nanstd(c) if np.isfinite(c).sum() > 1 else 1.0 for c in values.T])
        self._stats = {
            "v_mean": v_mean,
            "v_std": np.where(v_std > 1e-6, v_std, 1.0),
            "y_mean": np.array(target.mean()),
            "y_std": np.array(max(target.std(), 1e-6)),
        }
        graphs = self._graphs(smiles)
        y = torch.tensor((target - self._stats["y_mean"]) / self._stats["y_std"], dtype=torch.float32)
        with _torch_threads(cfg.threads):
            self.history, self._nets = [], []
            for member in range(cfg.members):
                self._nets.append(self._fit_one(graphs, values, y, cfg.seed + 1000 * member, member, progress))
        return self

    def fine_tuned(self, smiles: Sequence[str], values: np.ndarray, target: np.ndarray, epochs: int = 10,
                   lr_share: float = 0.1) -> GraphModel:
        """A copy of this fitted model trained ``epochs`` more on new data, at ``lr_share`` of the learning rate.

        The scaling of inputs and target stays the original one (the new data are few; the network's
        inputs must mean what they meant). Each member continues from its own weights with its own seed,
        so the ensemble stays diverse. ``self`` is unchanged.
        """
        import torch

        if not self._nets:
            raise RuntimeError("GraphModel.fine_tuned before fit")
        values = np.asarray(values, dtype=np.float64).reshape(len(smiles), len(self.tiers))
        target = np.asarray(target, dtype=np.float64)
        out = GraphModel(self.tiers, replace(self.config, epochs=epochs, lr=self.config.lr * lr_share))
        out._stats = dict(self._stats)
        graphs = out._graphs(smiles)
        y = torch.tensor((target - out._stats["y_mean"]) / out._stats["y_std"], dtype=torch.float32)
        with _torch_threads(out.config.threads):
            out._nets = [
                out._fit_one(graphs, values, y, out.config.seed + 1000 * m + 7, m, None, start=copy.deepcopy(net), nll_only=True)
                for m, net in enumerate(self._nets)
            ]
        return out

    def _fit_one(self, graphs, values, y, seed, member, progress, start=None, nll_only=False):  # noqa: ANN001, ANN202
        import torch

        cfg = self.config
        torch.manual_seed(seed)
        rng = np.random.default_rng(seed)
        net = self._build() if start is None else start
        opt = torch.optim.AdamW(net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        steps_per_epoch = math.ceil(len(graphs) / cfg.batch_size)
        total_steps = cfg.epochs * steps_per_epoch
        sched = torch.optim.lr_scheduler.OneCycleLR(  # warm up over a tenth (at least two steps), then anneal
            opt, max_lr=cfg.lr, total_steps=total_steps, pct_start=min(0.5, max(0.1, 2.5 / total_steps))
        )
        for epoch in range(cfg.epochs):
            net.train()
            order = rng.permutation(len(graphs))
            shown = values.copy()
            shown[rng.random(shown.shape) < cfg.hide_tier_prob] = np.nan
            glob = torch.from_numpy(self._globals(shown))
            total = 0.0
            for start in range(0, len(order), cfg.batch_size):
                idx = order[start : start + cfg.batch_size]
                x, ei, ef, owner = self._batch([graphs[i] for i in idx])
                mu, log_sd = net(x, ei, ef, owner, len(idx), glob[idx])
                # Gaussian NLL; the first tenth of training fits the mean only (a stable start).
                if epoch < max(cfg.epochs // 10, 1) and not nll_only:
                    loss = ((mu - y[idx]) ** 2).mean()
                else:
                    loss = (log_sd + 0.5 * ((y[idx] - mu) / log_sd.exp()) ** 2).mean()
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(net.parameters(), 5.0)
                opt.step()
                sched.step()
                total += loss.item() * len(idx)
            self.history.append(total / len(order))
            if progress is not None:
                progress(member * cfg.epochs + epoch + 1, cfg.members * cfg.epochs, self.history[-1])
        return net.eval()

    def save(self, path: Path) -> None:
        """Write the fitted network and its scaling to ``path`` (atomically)."""
        import torch

        if not self._nets:
            raise RuntimeError("GraphModel.save before fit")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        torch.save({"states": [n.state_dict() for n in self._nets], "stats": self._stats, "history": self.history}, tmp)
        os.replace(tmp, path)

    def load(self, path: Path) -> bool:
        """Load a network saved by :meth:`save` with this model's tiers and config; False if unreadable."""
        import torch

        # weights_only: tensors, containers and the numpy arrays of ``stats``, never arbitrary objects (a file planted
        # under $ARL_HOME/surrogates would otherwise run its code when unpickled).
        try:
            core = getattr(np, "_core", None) or np.core  # numpy 2 / 1.x
            arrays = [core.multiarray._reconstruct, np.ndarray, np.dtype, type(np.dtype(np.float64))]
            with torch.serialization.safe_globals(arrays):
                saved = torch.load(path, map_location="cpu", weights_only=True)
            nets = []
            for state in saved["states"]:
                nets.append(self._build())
                nets[-1].load_state_dict(state)
            if len(nets) != self.config.members:
                return False
        except Exception:  # noqa: BLE001 - a truncated or foreign file: train again
            return False
        self._nets, self._stats, self.history = [n.eval() for n in nets], saved["stats"], list(saved["history"])
        return True

    def predict(self, smiles: Sequence[str], values: np.ndarray, batch_size: int = 512) -> tuple[np.ndarray, np.ndarray]:
        """Mean and std of the top-tier value (uncalibrated): members' noise plus their disagreement."""
        mean, std, _ = self.predict_full(smiles, values, batch_size)
        return mean, std

    def predict_full(
        self, smiles: Sequence[str], values: np.ndarray, batch_size: int = 512
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Mean, std and the members' disagreement (std of their means: what an answer here would teach)."""
        import torch

        if not self._nets:
            raise RuntimeError("GraphModel.predict before fit")
        values = np.asarray(values, dtype=np.float64).reshape(len(smiles), len(self.tiers))
        graphs = self._graphs(smiles)
        glob = torch.from_numpy(self._globals(values))
        means, variances, spreads = [], [], []
        with _torch_threads(self.config.threads), torch.no_grad():
            for start in range(0, len(graphs), batch_size):
                part = graphs[start : start + batch_size]
                x, ei, ef, owner = self._batch(part)
                outs = [net(x, ei, ef, owner, len(part), glob[start : start + len(part)]) for net in self._nets]
                mu = np.stack([m.numpy() for m, _ in outs]).astype(np.float64)  # (members, batch)
                var = np.stack([np.exp(2.0 * s.numpy()) for _, s in outs]).astype(np.float64)
                means.append(mu.mean(axis=0))
                variances.append(var.mean(axis=0) + mu.var(axis=0))
                spreads.append(mu.std(axis=0))
        scale = float(self._stats["y_std"])
        return (
            np.concatenate(means) * scale + float(self._stats["y_mean"]),
            np.sqrt(np.concatenate(variances)) * scale,
            np.concatenate(spreads) * scale,
        )


_FITTED: dict[str, GraphModel] = {}


def _cache_dir() -> Path:
    return settings().home / "surrogates"


def fitted_model(
    model: GraphModel,
    smiles: Sequence[str],
    values: np.ndarray,
    target: np.ndarray,
    progress=None,  # noqa: ANN001
) -> GraphModel:
    """``model`` fitted on the data, or an identical model fitted earlier.

    Training is deterministic given the data, the tiers and the config, so a
    digest of those names the result: the network is trained once per
    process (benchmarks build many schedulers over the same history) and
    saved to ``$ARL_HOME/surrogates/<digest>.pt`` (default ``~/.arl``), so a
    later run over the same history loads it instead of training again. An
    unreadable file is ignored and replaced.
    """
    digest = hashlib.sha256()
    digest.update(repr((model.tiers, model.config, ATOM_DIM, BOND_DIM)).encode())
    digest.update("\x00".join(smiles).encode())
    digest.update(np.ascontiguousarray(values, dtype=np.float64).tobytes())
    digest.update(np.ascontiguousarray(target, dtype=np.float64).tobytes())
    key = digest.hexdigest()[:32]
    got = _FITTED.get(key)
    if got is not None:
        return got
    path = _cache_dir() / f"{key}.pt"
    if path.exists() and model.load(path):
        got = model
    else:
        got = model.fit(smiles, values, target, progress=progress)
        try:
            got.save(path)
        except OSError:  # a read-only home only costs the next run a retraining
            pass
    _FITTED[key] = got
    return got
