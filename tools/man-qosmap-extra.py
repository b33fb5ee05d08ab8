#!/usr/bin/env python3
"""Finishes docs/man/qosmap.1 after ArgumentParser's generate-manual: one
sentence per line and .Pp for blank lines (mandoc -T lint warns otherwise),
and the sections generate-manual cannot write: TABLE FILES, ENVIRONMENT,
FILES, EXIT STATUS (with the codes) and EXAMPLES."""
import re
import sys

EXTRA = r""".Sh "TABLE FILES"
A table file is YAML with a top-level
.Ic domain
key (or
.Ic profile
for a standards profile).
A file either derives a new domain
.Pq Ic import: default ,
then the cells to change, or overrides cells of the editable built-in
.Ic default
domain.
Every map must be total.
.Bd -literal -offset indent
domain: voice-edge
import: default
dei: ignore            # or color: S-tag DEI carries drop eligibility
inbound:
  dscp:
    44: [EF, green]
    8-15: [BE, green]
outbound:
  dscp:
    EF: {green: 46, yellow: 44, red: 0}
.Ed
.Pp
Problems are reported as
.Ar file : Ns Ar line : Ns Ar column : message ;
tabs are not allowed in indentation.
.Sh ENVIRONMENT
.Bl -tag -width Ds
.It Ev QOSMAP_DOMAINS_DIR
Read user tables from this directory instead of
.Pa /etc/qosmap/domains.d .
.El
.Sh FILES
.Bl -tag -width Ds
.It Pa /etc/qosmap/domains.d/*.yaml , *.yml
User domains and profiles, read by every command unless
.Fl -no-system-tables
is given.
A file there that cannot be read or loaded is skipped with a warning on
standard error;
.Nm validate
still fails on it.
.El
.Sh "EXIT STATUS"
.Bl -tag -width Ds
.It 0
Success.
.It 64
A bad command-line token; one line names it and what is allowed.
.It 65
Bad data: a table file
.Pq each problem as Ar file : Ns Ar line : Ns Ar column : message
or a capture.
.It 69
.Nm remark
could not load libpcap, or no qosmapd answers on the status socket
.Pq Nm status , Fl -live ;
the line names the socket and the errno.
.It 74
An output could not be written
.Po Nm remark Fl -out ,
.Nm import Fl o ,
or standard output
.Pc ;
one line names the file and the system's reason, such as
.Dq \&No space left on device .
The old file is kept and no temporary file is left.
.It 77
The status socket refused the caller
.Pq Nm status , Fl -live :
its mode, or qosmapd, which serves only root, its own user and
.Ic status.group .
.El
.Sh EXAMPLES
.Bd -literal -offset indent
qosmap lookup dscp 46
qosmap lookup 8021p 3 --dei --domain 5p3d
qosmap lookup class AF4 --color yellow --json
qosmap show 5p3d --field 8021p
qosmap names
qosmap validate /etc/qosmap/domains.d
qosmap remark --in trace.pcap --out remarked.pcap --trust 8021p \e
    --untrusted keep --rewrite dscp,8021p
.Ed
"""


def main(path):
    out = []
    literal = False
    for line in open(path).read().split("\n"):
        if line.startswith(".Bd"):
            literal = True
        if line.startswith(".Ed"):
            literal = False
        if literal or line.startswith("."):
            out.append(line)
        elif line.strip() == "":
            out.append(".Pp")
        else:
            # mandoc wants each sentence on a line of its own.
            # A text line that starts with ' is a roff control line: escape it.
            out.extend(
                "\\&" + l if l.startswith("'") else l
                for l in re.sub(r"([.?!]) +(?=[A-Z(])", "\\1\n", line).split("\n")
            )
    text = "\n".join(out)
    text = text.replace('.Sh "EXIT STATUS"\n.Ex -std', EXTRA.rstrip("\n"))
    # A .Pp right after a section or list macro is redundant.
    text = re.sub(r"\n\.Pp\n(\.Pp\n)+", "\n.Pp\n", text)
    text = re.sub(r"\n\.Pp\n(?=\.(Bl|It|El|Sh|Ss)\b)", "\n", text)
    open(path, "w").write(text)


if __name__ == "__main__":
    main(sys.argv[1])
