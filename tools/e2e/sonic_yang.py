#!/usr/bin/env python3
"""Translate SONiC config_db JSON (the QoS map tables `qosmap export sonic`
writes) into the YANG instance form of sonic-buildimage's sonic-yang-models,
as sonic-yang-mgmt does, so yanglint can validate it.

config_db:  {"DSCP_TO_TC_MAP": {"default": {"46": "5"}}}
YANG JSON:  {"sonic-dscp-tc-map:sonic-dscp-tc-map": {"sonic-dscp-tc-map:DSCP_TO_TC_MAP":
             {"DSCP_TO_TC_MAP_LIST": [{"name": "default", "DSCP_TO_TC_MAP": [{"dscp": "46", "tc": 5}]}]}}}

Leaves typed uint8 in YANG (tc) become JSON numbers when they are decimal
digits, as libyang 2 requires; anything else is passed through unchanged so
the validator, not this script, rejects it.

What has no YANG model is left out and listed on stderr ("not validated: ..."):
TC_TO_DOT1P_MAP (sonic-swss reads it; sonic-buildimage has no model), and the
PORT_QOS_MAP fields mpls_tc_to_tc_map and tc_to_dot1p_map (not in
sonic-port-qos-map.yang). PORT_QOS_MAP keys name ports (a leafref into
sonic-port), so each gets a stand-in PORT entry unless the input has a PORT table.

Usage: sonic_yang.py CONFIG_DB.json > YANG.json
"""
import json
import sys

# table -> (module, key leaf, value leaf, which of them is uint8)
MAPS = {
    "DSCP_TO_TC_MAP": ("sonic-dscp-tc-map", "dscp", "tc", "tc"),
    "DOT1P_TO_TC_MAP": ("sonic-dot1p-tc-map", "dot1p", "tc", "tc"),
    "MPLS_TC_TO_TC_MAP": ("sonic-mpls-tc-map", "mpls", "tc", "tc"),
    "TC_TO_DSCP_MAP": ("sonic-tc-dscp-map", "tc", "dscp", "tc"),
}
NO_MODEL = {"TC_TO_DOT1P_MAP"}
PORT_QOS_LEAVES = {
    "tc_to_pg_map", "tc_to_queue_map", "pfc_enable", "pfcwd_sw_enable", "pfc_to_queue_map",
    "pfc_to_pg_map", "dscp_to_tc_map", "tc_to_dscp_map", "dot1p_to_tc_map", "scheduler",
}


def typed(leaf, uint8_leaf, value):
    if leaf == uint8_leaf and isinstance(value, str) and value.isdigit():
        return int(value)
    return value


def translate(db):
    out = {}
    skipped = []
    for table, maps in sorted(db.items()):
        if table in MAPS:
            module, key, val, uint8 = MAPS[table]
            items = []
            for name, entries in sorted(maps.items()):
                items.append({
                    "name": name,
                    table: [{key: typed(key, uint8, k), val: typed(val, uint8, v)} for k, v in sorted(entries.items())],
                })
            out[f"{module}:{module}"] = {f"{module}:{table}": {f"{table}_LIST": items}}
        elif table in NO_MODEL:
            skipped.append(f"{table} ({len(maps)} maps): no YANG model in sonic-buildimage")
        elif table == "PORT_QOS_MAP":
            items = []
            for ifname, fields in sorted(maps.items()):
                entry = {"ifname": ifname}
                for f, v in sorted(fields.items()):
                    if f in PORT_QOS_LEAVES:
                        entry[f] = v
                    else:
                        skipped.append(f"PORT_QOS_MAP {ifname} {f}: not in sonic-port-qos-map.yang")
                items.append(entry)
            out["sonic-port-qos-map:sonic-port-qos-map"] = {
                "sonic-port-qos-map:PORT_QOS_MAP": {"PORT_QOS_MAP_LIST": items}}
            if "PORT" not in db:
                ports = [
                    {"name": ifname, "alias": f"eth{i}", "lanes": str(65 + i), "speed": 25000, "mtu": 9100,
                     "admin_status": "up"}
                    for i, ifname in enumerate(sorted(k for k in maps if k != "global"))]
                out["sonic-port:sonic-port"] = {"sonic-port:PORT": {"PORT_LIST": ports}}
        elif table == "PORT":
            out["sonic-port:sonic-port"] = {"sonic-port:PORT": {"PORT_LIST": [
                dict({"name": name}, **fields) for name, fields in sorted(maps.items())]}}
        else:
            skipped.append(f"{table}: not a QoS map table")
    return out, skipped


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: sonic_yang.py CONFIG_DB.json")
    with open(sys.argv[1]) as f:
        db = json.load(f)
    out, skipped = translate(db)
    for s in skipped:
        print(f"not validated: {s}", file=sys.stderr)
    json.dump(out, sys.stdout, indent=4, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
