#!/usr/bin/env python3
"""Summarises Nsight Compute's source page, for reading where a kernel's warps stall on the GPU
machine (docs/perf.md): warp-stall samples per SASS opcode, per reason column, and the hottest
instructions, for each kernel table in each file given. Export the page with
`ncu -i REPORT.ncu-rep --page source --csv --print-source sass > FILE.csv`. Tolerant of the
column names, which differ between ncu versions: it prints the header it found.

With `--sass DIS --cu SOURCE` (DIS: `nvdisasm -c -gi` of the same cubin, which
`mkc kernels --model M [--persistent] --cubin F` writes with the build's hash; SOURCE:
backend/kernels/mkc.cu) it also attributes the samples to source lines (innermost inlined
function) and to kinds of wait: a branch on an mbarrier try_wait (page landed or, in the
producer's loop, slot free), named barriers, the release's membar, everything else by opcode.

usage: python3 tools/ncu_stalls.py [--sass DIS --cu SOURCE] FILE.csv [FILE.csv ...]
"""
import csv
import re
import sys
from collections import defaultdict


def sections(path):
    """Yield (kernel title, header, rows) for every table in the file."""
    # A title line (the kernel's name) comes before its table's header: it names the next
    # table, not the one being read.
    title, upcoming, header, rows = "", "", None, []
    with open(path, newline="", errors="replace") as f:
        for rec in csv.reader(f):
            if not rec:
                continue
            if any(c.strip() == "Source" for c in rec) and any("Address" in c for c in rec):
                if header is not None:
                    yield title, header, rows
                title, header, rows = upcoming, [c.strip() for c in rec], []
                continue
            if rec[0].strip() == "Kernel Name" and len(rec) > 1:
                upcoming = rec[1].strip()
                continue
            if header is None or len(rec) < len(header) - 1:
                if len(rec) == 1 and rec[0].strip():
                    upcoming = rec[0].strip()
                continue
            rows.append(rec)
    if header is not None:
        yield title, header, rows


def num(s):
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return None


def opcode(sass):
    s = re.sub(r"^@!?U?P\w+\s+", "", sass.strip())
    return s.split(" ")[0] if s else "?"


def disassembly(path, kernel):
    """[(offset, instruction, inline chain of generated-source lines, innermost first)] of
    `kernel`'s section in an `nvdisasm -c -gi` listing."""
    text = open(path, errors="replace").read()
    start = text.find(f".text.{kernel}:")
    if start < 0:
        return []
    end = text.find("//--------------------- .text.", start)
    # A chain of "//## File" comments precedes an instruction whose line differs from the
    # one before; the instructions after it keep that chain.
    out, chain, last = [], [], ()
    for line in text[start:end if end > 0 else len(text)].splitlines():
        m = re.search(r'//## File ".*?", line (\d+)', line)
        if m:
            chain.append(int(m.group(1)))
            continue
        m = re.search(r"/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if m:
            last = tuple(chain) or last
            out.append((int(m.group(1), 16), m.group(2).strip(), last))
            chain = []
    return out


def attribute(kernel, header, rows, key, reasons, sass_path, cu_path):
    """Samples by source line and by kind of wait, from the disassembly of the same cubin."""
    dis = disassembly(sass_path, kernel)
    if not dis or not rows:
        print(f"   (no section .text.{kernel} in {sass_path})")
        return
    cu = open(cu_path, errors="replace").read().splitlines()
    entry = next((i + 1 for i, l in enumerate(cu) if re.search(rf"\b{kernel}\(", l) and "__global__" in l), None)
    first = next((c[-1] for _, _, c in dis if c), None)
    offset = first - entry if entry and first else 0
    print(f"   source lines: generated line - {offset} = {cu_path} line")
    at = {o: (ins, tuple(l - offset for l in c)) for o, ins, c in dis}
    order = [o for o, _, _ in dis]
    index = {o: k for k, o in enumerate(order)}
    base = int(rows[0][0], 16)
    src = header.index("Source")
    by_line, kinds, total = defaultdict(float), defaultdict(float), 0.0
    for r in rows:
        n = num(r[key]) or 0
        if not n:
            continue
        total += n
        off = int(r[0], 16) - base
        ins, chain = at.get(off, (r[src].strip(), ()))
        by_line[chain[0] if chain else -1] += n
        why = max(reasons, key=lambda i: num(r[i]) or 0) if reasons else None
        why = header[why] if why is not None else ""
        op = opcode(ins)
        kind = op
        if "barrier" in why:
            kind = "named barrier"
        elif op in ("MEMBAR", "ERRBAR") or "membar" in why:
            kind = "release (membar)"
        elif op == "BRA" and ins.startswith("@"):
            pred = re.match(r"@!?(U?P\d)", ins).group(1)
            k = index.get(off, 0)
            setter = next((order[j] for j in range(k - 1, max(k - 40, -1), -1)
                           if re.search(rf"\b{pred}\b", at[order[j]][0].split(",")[0])), None)
            kind = "branch on " + (opcode(at[setter][0]) if setter is not None else "?")
            if setter is not None and "SYNCS" in at[setter][0]:
                kind = "mbarrier wait (page landed or slot free)"
        kinds[kind] += n
    print("   by kind:", ", ".join(f"{k} {v / total * 100:.1f}%" for k, v in
                                    sorted(kinds.items(), key=lambda kv: -kv[1])[:12]))
    for line, n in sorted(by_line.items(), key=lambda kv: -kv[1])[:30]:
        text = cu[line - 1].strip()[:90] if 0 < line <= len(cu) else "?"
        print(f"   {n / total * 100:5.1f}% line {line:5d}  {text}")


def main():
    args = sys.argv[1:]
    sass_path = cu_path = None
    while args and args[0] in ("--sass", "--cu"):
        if len(args) < 2:
            sys.exit(__doc__)
        if args[0] == "--sass":
            sass_path = args[1]
        else:
            cu_path = args[1]
        args = args[2:]
    if bool(sass_path) != bool(cu_path):
        sys.exit("--sass and --cu go together\n" + __doc__)
    for path in args:
        try:
            tables = list(sections(path))
        except OSError as e:
            print(f"{path}: {e}")
            continue
        if not tables:
            print(f"{path}: no source table found; first lines:")
            with open(path, errors="replace") as f:
                for _ in range(8):
                    print("   ", f.readline().rstrip()[:200])
            continue
        for title, header, rows in tables:
            src = header.index("Source")
            samp = [i for i, h in enumerate(header) if "Sampling" in h and "All" in h]
            if not samp:
                samp = [i for i, h in enumerate(header) if "Sampl" in h]
            reasons = [i for i, h in enumerate(header) if h.lower().startswith("stall") or "stall_" in h.lower()]
            print(f"== {path} {title[:100]}: {len(rows)} instructions")
            print("   columns:", " | ".join(header)[:1500])
            if not samp:
                continue
            key = samp[0]
            total = sum(num(r[key]) or 0 for r in rows)
            print(f"   samples ({header[key]}): {total:.0f}")
            by_op = defaultdict(float)
            for r in rows:
                by_op[opcode(r[src])] += num(r[key]) or 0
            print("   by opcode:", ", ".join(f"{o} {v / max(total, 1) * 100:.1f}%" for o, v in
                                            sorted(by_op.items(), key=lambda kv: -kv[1])[:25]))
            if reasons:
                tot = {header[i]: sum(num(r[i]) or 0 for r in rows) for i in reasons}
                print("   by reason:", ", ".join(f"{h} {v / max(total, 1) * 100:.1f}%" for h, v in
                                               sorted(tot.items(), key=lambda kv: -kv[1])[:20] if v))
            hot = sorted(rows, key=lambda r: -(num(r[key]) or 0))[:45]
            for r in hot:
                extra = ""
                if reasons:
                    top = sorted(((num(r[i]) or 0, header[i]) for i in reasons), reverse=True)[:3]
                    extra = "  " + ", ".join(f"{h}={v:.0f}" for v, h in top if v)
                off = int(r[0], 16) - int(rows[0][0], 16)
                print(f"   {off:>#8x} {num(r[key]) or 0:>8.0f} {r[src].strip()[:70]:<70}{extra}")
            if sass_path:
                kernel = title.split()[-1] if title else "?"
                attribute(kernel, header, rows, key, reasons, sass_path, cu_path)


if __name__ == "__main__":
    main()
