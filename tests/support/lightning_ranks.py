"""Reads and checks the ranks file the TAO stand-in's Lightning processes write (testclusters/tao_lightning)."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from testclusters.tao_lightning import RANKS_FILE


def read(folder: Path) -> list[dict]:
    path = Path(folder) / RANKS_FILE
    assert path.is_file(), f"no {RANKS_FILE} in {folder}: no Lightning process got past its rendezvous"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def check(lines: list[dict], nodes: int, per_node: int) -> dict[int, list[dict]]:
    """Every process of a ``nodes`` x ``per_node`` DDP run once, each with the ranks Lightning owes it, all in one
    process group (the all_reduce sum), all in Lightning's own environment (it started the processes of each
    node itself). Returns the lines by node rank."""
    world = nodes * per_node
    summary = [(ln["global_rank"], ln["node_rank"], ln["local_rank"], ln["world_size"]) for ln in lines]
    assert sorted(ln["global_rank"] for ln in lines) == list(range(world)), summary
    assert {ln["world_size"] for ln in lines} == {world}, summary
    assert {ln["all_reduce_sum"] for ln in lines} == {world}, summary
    assert Counter(ln["node_rank"] for ln in lines) == {n: per_node for n in range(nodes)}, summary
    by_node = {n: sorted((ln for ln in lines if ln["node_rank"] == n), key=lambda ln: ln["local_rank"])
               for n in range(nodes)}
    for n, group in by_node.items():
        assert [ln["local_rank"] for ln in group] == list(range(per_node)), summary
        # Lightning's DDP rank rule: node_rank * devices + local_rank
        assert [ln["global_rank"] for ln in group] == [n * per_node + i for i in range(per_node)], summary
    assert {ln["cluster_environment"] for ln in lines} == {"LightningEnvironment"}, summary
    assert {(ln["num_nodes"], ln["devices"]) for ln in lines} == {(nodes, per_node)}, summary
    return by_node
