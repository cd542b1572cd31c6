"""Prefect flows and the arl CLI. The only package that imports Prefect."""
