import QoSMapCore
import QoSMapTables
import Testing

/// Malformed domain files and the exact diagnostic each must produce.
let malformedDomainFiles: [(file: String, yaml: String, diagnostic: String)] = [
    (
        "01-syntax.yaml",
        """
        domain: x
        inbound: [unclosed
        """,
        "01-syntax.yaml:3:1: YAML syntax: did not find expected ',' or ']' (while parsing a flow sequence at line 2, column 10)"
    ),
    (
        "02-unknown-key.yaml",
        """
        domain: mine
        import: default
        colour: red
        """,
        "02-unknown-key.yaml:3:1: unknown key 'colour' in a domain file; allowed: domain, description, editable, dei, import, inbound, outbound"
    ),
    (
        "03-missing-domain.yaml",
        """
        import: default
        inbound: {}
        """,
        "03-missing-domain.yaml:1:1: a table file needs a top-level 'domain' key (or 'profile' for a standards profile)"
    ),
    (
        "04-bad-name.yaml",
        """
        domain: "my domain!"
        import: default
        """,
        "04-bad-name.yaml:1:9: invalid domain name 'my domain!'; allowed: 1-64 of A-Z a-z 0-9 - _ ."
    ),
    (
        "05-5p3d.yaml",
        """
        # tries to change a fixed domain
        domain: 5p3d
        inbound:
          8021p:
            0: [BE, green]
        """,
        "05-5p3d.yaml:2:9: domain '5p3d' is built in and cannot be modified; derive a new domain with 'import: 5p3d'"
    ),
    (
        "06-unknown-import.yaml",
        """
        domain: mine
        import: defualt
        """,
        "06-unknown-import.yaml:2:9: unknown domain 'defualt' to import; known domains: default, 5p3d, edge-cake"
    ),
    (
        "07-unknown-field.yaml",
        """
        domain: mine
        import: default
        inbound:
          tos:
            0: [BE, green]
        """,
        "07-unknown-field.yaml:4:3: unknown field 'tos'; allowed: dscp, ip-precedence (prec), 8021p (pcp, dot1p), exp (mpls-exp)"
    ),
    (
        "08-dscp-range.yaml",
        """
        domain: mine
        import: default
        inbound:
          dscp:
            64: [BE, green]
        """,
        "08-dscp-range.yaml:5:5: dscp value 64 is out of range; allowed: 0-63"
    ),
    (
        "09-bad-class.yaml",
        """
        domain: mine
        import: default
        inbound:
          dscp:
            46: [AF5, green]
        """,
        "09-bad-class.yaml:5:10: unknown service class 'AF5'; allowed: BE, AF1, AF2, AF3, AF4, EF, CS6, CS7"
    ),
    (
        "10-bad-color.yaml",
        """
        domain: mine
        import: default
        inbound:
          exp:
            5: [EF, blue]
        """,
        "10-bad-color.yaml:5:13: unknown color 'blue'; allowed: green, yellow, red"
    ),
    (
        "11-duplicate.yaml",
        """
        domain: mine
        import: default
        inbound:
          dscp:
            40-47: [EF, green]
            46: [AF4, green]
        """,
        "11-duplicate.yaml:6:5: dscp 46 is already mapped at line 5, column 5"
    ),
    (
        "13-outbound-value.yaml",
        """
        domain: mine
        import: default
        outbound:
          8021p:
            EF: 8
        """,
        "13-outbound-value.yaml:5:9: 8021p value 8 is out of range; allowed: 0-7"
    ),
    (
        "14-outbound-color.yaml",
        """
        domain: mine
        import: default
        outbound:
          dscp:
            AF1: {green: 10, amber: 12}
        """,
        "14-outbound-color.yaml:5:22: unknown color 'amber'; allowed: green, yellow, red"
    ),
    (
        "15-pair-shape.yaml",
        """
        domain: mine
        import: default
        inbound:
          ip-precedence:
            3: AF3
        """,
        "15-pair-shape.yaml:5:8: expected [CLASS, color] (a two-item sequence), found a scalar"
    ),
    (
        "16-dei.yaml",
        """
        domain: mine
        import: default
        dei: maybe
        """,
        "16-dei.yaml:3:6: invalid dei policy 'maybe'; allowed: ignore, color"
    ),
    (
        "17-editable.yaml",
        """
        domain: mine
        import: default
        editable: sometimes
        """,
        "17-editable.yaml:3:11: invalid editable flag 'sometimes'; allowed: true, false"
    ),
    (
        "18-duplicate-key.yaml",
        """
        domain: mine
        import: default
        domain: other
        """,
        "18-duplicate-key.yaml:3:1: duplicate key 'domain' (first at line 1, column 1)"
    ),
    (
        "19-range.yaml",
        """
        domain: mine
        import: default
        inbound:
          dscp:
            50-40: [BE, green]
        """,
        "19-range.yaml:5:5: invalid range '50-40': 50 is above 40"
    ),
    (
        "20-empty.yaml",
        """
        # nothing here
        """,
        "20-empty.yaml:1:1: empty table file"
    ),
    (
        "21-toplevel-list.yaml",
        """
        - domain: mine
        """,
        "21-toplevel-list.yaml:1:1: expected a table file (a mapping), found a sequence"
    ),
    (
        "22-outbound-class.yaml",
        """
        domain: mine
        import: default
        outbound:
          exp:
            GOLD: 5
        """,
        "22-outbound-class.yaml:5:5: unknown service class 'GOLD'; allowed: BE, AF1, AF2, AF3, AF4, EF, CS6, CS7"
    ),
]
