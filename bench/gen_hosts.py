#!/usr/bin/env python3
"""Writes a host inventory for bench/data.sh: HOSTS records (default 10,000)
of 10 fields each, keyed by hostname, as YAML, JSON and TOML files in DIR."""
import json
import os
import sys

out = sys.argv[1]
hosts = int(os.environ.get("HOSTS", "10000"))
records = {}
for i in range(hosts):
    name = f"web{i:05d}.dc{i % 4}.example.org"
    records[name] = {
        "hostname": name,
        "ip": f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}",
        "port": 8000 + i % 1000,
        "tls": i % 2 == 0,
        "role": ["web", "api", "db", "cache"][i % 4],
        "backends": [f"10.1.{i % 256}.{j}:8080" for j in range(3)],
        "mode": "0640",
        "timeout": f"{30 + i % 60}s",
        "datacenter": f"dc{i % 4}",
        "weight": 1 + i % 5,
    }

with open(os.path.join(out, "hosts.json"), "w") as f:
    json.dump(records, f, indent=2)

with open(os.path.join(out, "hosts.yaml"), "w") as f:
    for name, r in records.items():
        f.write(f"{name}:\n")
        for k, v in r.items():
            if isinstance(v, bool):
                v = "true" if v else "false"
            elif isinstance(v, list):
                v = "[" + ", ".join(f'"{x}"' for x in v) + "]"
            elif isinstance(v, str):
                v = f'"{v}"'
            f.write(f"  {k}: {v}\n")

with open(os.path.join(out, "hosts.toml"), "w") as f:
    for name, r in records.items():
        f.write(f'["{name}"]\n')
        for k, v in r.items():
            f.write(f"{k} = {json.dumps(v)}\n")
        f.write("\n")
