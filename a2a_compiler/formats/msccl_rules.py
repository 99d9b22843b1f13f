"""The MSCCL executors' acceptance rules, in one place (facts from Azure/msccl-executor-nccl's
``src/misc/msccl/msccl_parser.cc``, ``src/include/msccl/msccl_struct.h``, ``msccl_parser.h``,
``makefiles/common.mk`` and ROCm/rccl's copies of them; docs/msccl.md cites each rule).

Two executors read MSCCL XML with the same parser but different limits: the
:data:`TARGETS` ``nccl`` (msccl-executor-nccl, NCCL 2.23) and ``rccl`` (ROCm's RCCL).

The lowering (:mod:`a2a_compiler.lower.msccl`) stays within the limits, the
verifier (:mod:`a2a_compiler.verify`) reports every broken rule, and the MPI
runtime (:mod:`runtimes.mpi.plan`) refuses a program that breaks one.  Passes,
each usable alone, each naming the location (line, or gpu/tb/step):

* :func:`check_lexical` — the executor's hand-written tokenizer, on the raw text;
* :func:`check_attributes` — required attributes and known elements, on the parsed tree;
* :func:`check_rules` — on the program for one :class:`Target`, one function per rule
  family: :func:`check_algo`, :func:`check_gpus`, :func:`check_parser`,
  :func:`check_thread_blocks`, :func:`check_steps`, :func:`check_dependencies`, then
  :func:`check_connections`.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from .msccl import ALGO_ATTRS, GPU_ATTRS, PROTOS, STEP_ATTRS, TB_ATTRS, MscclGpu, MscclProgram

#: Limits both executors share: steps per thread block (``MSCCL_MAX_NUM_STEPS``, default build),
#: chunks per step (``count < MSCCL_MAX_COUNT`` = 72), the int8 ``depid``, the int16 offsets,
#: sending / receiving thread blocks per channel (``MSCCL_MAX_NUM_THREAD_BLOCKS_PER_CHANNEL``).
MAX_STEPS_PER_TB = 64
MAX_CNT = 71
MAX_DEPID = 127
MAX_OFFSET = 32767
MAX_PEER_TBS_PER_CHANNEL = 32
#: The XML parser (``msccl_parser.h``): it stores a rank's ``<algo>``, every ``<gpu>``, and that
#: rank's ``<tb>`` and ``<step>`` elements in a table of ``MAX_NODES`` = 4096 and fails as soon as
#: the table is full and one more tag is read (there always is one: ``</algo>``), so at most 4095;
#: a node has at most ``MAX_SUBS`` = 1024 children (not bounds-checked: more overwrite memory),
#: at most ``MAX_ATTR_COUNT`` = 16 attributes (later ones are ignored), names of at most 253
#: characters and values of at most 255 (the value buffer is not bounds-checked).
MAX_PARSER_NODES = 4095
MAX_CHILDREN = 1024
MAX_ATTRS = 16
MAX_NAME_LEN = 253
MAX_VALUE_LEN = 255
#: Beyond these the executor still loads the file, but it is unusual enough to warn.
WARN_CHANNELS = 32
WARN_TBS = 108  # SMs of an A100


@dataclass(frozen=True)
class Target:
    """One MSCCL executor: the limits that differ between them, and how it finds files."""

    name: str
    executor: str
    max_tbs: int        # MSCCL_MAX_NUM_THREAD_BLOCKS: thread block ids per GPU
    max_channels: int   # MAXCHANNELS: channels NCCL/RCCL can build
    file_order: str     # the order files of $MSCCL_ALGO_DIR are tried in


#: ``--target`` name -> :class:`Target`.
TARGETS = {
    "nccl": Target("nccl", "msccl-executor-nccl (NCCL 2.23)", 32 * 32, 32, "sorted by path"),
    "rccl": Target("rccl", "RCCL (ROCm)", 64, 128, "readdir order (unsorted)"),
}
DEFAULT_TARGET = "nccl"
#: The NCCL limit on thread blocks per GPU, the largest of the targets'.
MAX_TBS = TARGETS["nccl"].max_tbs


def get_target(name: str | Target) -> Target:
    """The :class:`Target` called ``name`` (a :class:`Target` is returned as it is)."""
    from ..errors import A2AError

    if isinstance(name, Target):
        return name
    if name not in TARGETS:
        raise A2AError(f"--target must be one of {', '.join(TARGETS)}, got {name!r}")
    return TARGETS[name]


def parser_nodes(p: MscclProgram, g: MscclGpu) -> int:
    """Parser table entries when rank ``g.id`` loads ``p``: ``<algo>``, every ``<gpu>``, ``g``'s tbs and steps."""
    return 1 + len(p.gpus) + len(g.tbs) + sum(len(tb.steps) for tb in g.tbs)
#: Step types and the buffers they read (src) / write (dst) locally.
DATA_TYPES = {"s": (True, False), "r": (False, True), "rcs": (True, True), "cpy": (True, True)}
REDUCE_TYPES = ("re", "rrs", "rrc", "rrcs")
SENDS = ("s", "rcs")
RECVS = ("r", "rcs")
BUFFERS = ("i", "o", "s")
INT16 = (-(2**15), 2**15 - 1)
#: ``<algo>`` attributes msccl-tools 2.3 does not write, and the values an all-to-all needs.
MSCCL_TOOLS_OMITS = {"outofplace": "1", "minBytes": "0", "maxBytes": "0"}
#: Lexical problems of one kind listed before the rest are only counted.
MAX_LEXICAL_REPORTS = 10


# --------------------------------------------------------------- lexical form


def check_lexical(data: bytes) -> list[str]:
    """Rules of the executor's tokenizer, checked on the raw bytes.

    No ``<?xml ...?>`` declaration (nor any ``<?``), no tab, no newline inside
    a tag, double-quoted attribute values, and ``<algo`` as the first element.
    Comments are skipped; CRLF is fine.
    """
    errors = []
    text = data.decode("utf-8", errors="replace")
    if text.startswith("\ufeff"):
        errors.append("line 1: byte-order mark before <algo> (the executor's tokenizer does not skip it)")
    pis = [m.start() for m in re.finditer(r"<\?", text)]
    for pos in pis[:MAX_LEXICAL_REPORTS]:
        line = text.count("\n", 0, pos) + 1
        what = "XML declaration <?xml ...?>" if text.startswith("<?xml", pos) else "processing instruction <?...?>"
        errors.append(f"line {line}: {what} is not allowed (the executor's tokenizer fails on '?')")
    if len(pis) > MAX_LEXICAL_REPORTS:
        errors.append(f"... and {len(pis) - MAX_LEXICAL_REPORTS} more '<?'")
    tabs = [lineno for lineno, line in enumerate(text.split("\n"), 1) if "\t" in line]
    errors += [f"line {lineno}: tab character (indent with spaces only)" for lineno in tabs[:MAX_LEXICAL_REPORTS]]
    if len(tabs) > MAX_LEXICAL_REPORTS:
        errors.append(f"... and {len(tabs) - MAX_LEXICAL_REPORTS} more lines with tabs")
    first = None
    i, n = 0, len(text)
    line, counted = 1, 0  # line number of position ``counted``
    while i < n:
        lt = text.find("<", i)
        if lt < 0:
            break
        if text.startswith("<!--", lt):
            end = text.find("-->", lt + 4)
            i = n if end < 0 else end + 3
            continue
        line += text.count("\n", counted, lt)
        counted = lt
        j, quote, bad_nl, bad_q = lt + 1, None, False, False
        while j < n and (quote or text[j] != ">"):
            ch = text[j]
            if quote:
                if ch == quote:
                    quote = None
            elif ch in "\"'":
                quote = ch
                bad_q |= ch == "'"
            if ch == "\n":
                bad_nl = True
            j += 1
        tag = re.match(r"</?\s*([A-Za-z_][\w.-]*)", text[lt:j + 1])
        name = tag.group(1) if tag else text[lt:lt + 10]
        if bad_nl and len(errors) < 4 * MAX_LEXICAL_REPORTS:
            errors.append(f"line {line}: newline inside the <{name}> tag (each tag must stay on one line)")
        if bad_q and len(errors) < 4 * MAX_LEXICAL_REPORTS:
            errors.append(f"line {line}: single-quoted attribute in <{name}> (use double quotes)")
        if first is None and not text.startswith("<?", lt):
            first = name
            if name != "algo" or text.startswith("</", lt):
                errors.append(f"line {line}: the first element is <{name}>, the executor requires <algo>")
        i = j + 1
    if first is None:
        errors.append("line 1: no <algo> element")
    return errors


# ------------------------------------------------------------ raw attributes


def check_attributes(root) -> list[str]:
    """Every attribute the executor requires is present; only known elements appear."""
    errors = []

    def need(el, names, where):
        for a in names:
            if el.get(a) is None:
                errors.append(f"{where}: <{el.tag}> is missing required attribute {a!r}")

    missing = [a for a in MSCCL_TOOLS_OMITS if root.get(a) is None]
    if missing:
        errors.append(f"algo: <algo> is missing required attribute{'s' if len(missing) > 1 else ''} "
                      f"{', '.join(map(repr, missing))}, without which the executor rejects the file "
                      f"(msccl-tools 2.3 omits them): add "
                      + " ".join(f'{a}="{MSCCL_TOOLS_OMITS[a]}"' for a in missing) + " to <algo>")
    need(root, [a for a in ALGO_ATTRS if a not in MSCCL_TOOLS_OMITS], "algo")

    for el in root.iter():
        if not isinstance(el.tag, str):
            continue
        where = f"line {el.sourceline}: <{el.tag}>"
        if len(el.tag) > MAX_NAME_LEN or any(len(k) > MAX_NAME_LEN for k in el.attrib):
            errors.append(f"{where} has a name over {MAX_NAME_LEN} characters (the parser fails on it)")
        long = [k for k, v in el.attrib.items() if len(v) > MAX_VALUE_LEN]
        if long:
            errors.append(f"{where} attribute {long[0]!r} is {len(el.get(long[0]))} characters long; the parser's "
                          f"value buffer holds {MAX_VALUE_LEN} (and is not bounds-checked)")
        if len(el.attrib) > MAX_ATTRS:
            lost = [k for k in list(el.attrib)[MAX_ATTRS:]
                    if k in {"algo": ALGO_ATTRS, "gpu": GPU_ATTRS, "tb": TB_ATTRS, "step": STEP_ATTRS}.get(el.tag, ())]
            if lost:
                errors.append(f"{where} has {len(el.attrib)} attributes; the parser reads the first {MAX_ATTRS} and "
                              f"never sees {', '.join(map(repr, lost))}")
        if len(errors) >= MAX_LEXICAL_REPORTS:
            break

    def elements(parent, tag, where):
        """``parent``'s ``<tag>`` children; any other element is reported."""
        for el in parent:
            if isinstance(el.tag, str):
                if el.tag == tag:
                    yield el
                else:
                    errors.append(f"{where}line {el.sourceline}: unexpected element <{el.tag}> inside <{parent.tag}>")

    for g in elements(root, "gpu", ""):
        gw = f"gpu {g.get('id', '?')}"
        need(g, GPU_ATTRS, gw)
        for t in elements(g, "tb", f"{gw} "):
            tw = f"{gw} tb {t.get('id', '?')}"
            need(t, TB_ATTRS, tw)
            for pos, st in enumerate(elements(t, "step", f"{tw} ")):
                need(st, STEP_ATTRS, f"{tw} step {st.get('s', pos)}")
    return errors


# --------------------------------------------------------------------- rules


@dataclass
class Findings:
    """What the rule families found: ``errors``, ``warnings``, and ``sound`` — False once an
    error makes the program too broken (ids, buffers, dependency targets) to simulate or run."""

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    sound: bool = True

    def error(self, msg: str, structural: bool = False) -> None:
        """Record a broken rule; ``structural`` when the program cannot be simulated or run with it."""
        self.errors.append(msg)
        self.sound &= not structural

    def warn(self, msg: str) -> None:
        """Record something the executor accepts but other tools or NCCL may not."""
        self.warnings.append(msg)


def check_rules(p: MscclProgram, target: str | Target = DEFAULT_TARGET) -> Findings:
    """Every program-level rule of executor ``target``: the families below, then
    :func:`check_connections` if the structure is sound.  ``sound`` in the result means no
    error at all: only then is the program worth simulating or running."""
    f = Findings()
    t = get_target(target)
    for family in (check_algo, check_gpus, check_parser, check_thread_blocks, check_steps, check_dependencies):
        family(p, f, t)
    if f.sound:
        check_connections(p, f)
    f.sound = not f.errors
    return f


def check_algo(p: MscclProgram, f: Findings, t: Target = TARGETS[DEFAULT_TARGET]) -> None:
    """``<algo>``: protocol, collective, in/out of place, channels, byte range, sizes."""
    if p.proto not in PROTOS:
        f.error(f"algo: proto={p.proto!r}, must be one of {', '.join(PROTOS)}")
    if p.coll != "alltoall":
        f.error(f"algo: coll={p.coll!r}, expected 'alltoall'", True)
    if p.inplace != 0 or p.outofplace != 1:
        f.error(f"algo: inplace={p.inplace} outofplace={p.outofplace}; all-to-all must be inplace=\"0\" "
                f"outofplace=\"1\"")
    if p.nchannels < 1:
        f.error(f"algo: nchannels={p.nchannels}, must be at least 1")
    elif p.nchannels > t.max_channels:
        f.error(f"algo: nchannels={p.nchannels}, over the {t.max_channels} channels {t.executor} can build "
                f"(MAXCHANNELS); it refuses the algorithm")
    elif p.nchannels > WARN_CHANNELS:
        f.warn(f"algo: nchannels={p.nchannels}; NCCL rarely builds that many channels")
    if p.min_bytes < 0 or p.max_bytes < 0 or (p.max_bytes and p.max_bytes < p.min_bytes):
        f.error(f"algo: minBytes={p.min_bytes} maxBytes={p.max_bytes}; need 0 <= minBytes <= maxBytes "
                f"(maxBytes 0 = no limit)")
    if p.ngpus != len(p.gpus):
        f.error(f"algo: ngpus={p.ngpus} but the file has {len(p.gpus)} <gpu> elements", True)
    if p.ngpus < 1 or p.nchunksperloop < 1 or p.nchunksperloop % max(p.ngpus, 1):
        f.error(f"algo: nchunksperloop={p.nchunksperloop} must be a positive multiple of ngpus={p.ngpus} "
                f"(ngpus x chunks per peer)", True)
    if p.nchunksperloop > MAX_OFFSET + 1:
        f.error(f"algo: nchunksperloop={p.nchunksperloop} exceeds the int16 offset range", True)


def buffer_sizes(p: MscclProgram, g: MscclGpu) -> dict[str, int]:
    """Chunks in each of ``g``'s buffers.  The input and output buffers of a collective hold
    ``nchunksperloop`` chunks whatever ``i_chunks``/``o_chunks`` declare (msccl-tools may
    declare more)."""
    return {"i": p.nchunksperloop, "o": p.nchunksperloop, "s": max(g.s_chunks, 0)}


def check_gpus(p: MscclProgram, f: Findings, t: Target = TARGETS[DEFAULT_TARGET]) -> None:
    """``<gpu>``: ids ``0..ngpus-1`` (in any order), buffer sizes, thread block ids and count."""
    n = len(p.gpus)
    ids = sorted(g.id for g in p.gpus)
    if ids != list(range(n)):
        f.error(f"algo: <gpu> ids {_ranges(ids)} must be 0..{n - 1}, each once", True)
    for g in p.gpus:
        gw = f"gpu {g.id}"
        for name, val in (("i_chunks", g.i_chunks), ("o_chunks", g.o_chunks)):
            if val < p.nchunksperloop:
                f.error(f"{gw}: {name}={val}, an all-to-all needs nchunksperloop={p.nchunksperloop}", True)
            elif val > p.nchunksperloop:
                f.warn(f"{gw}: {name}={val} is more than the {p.nchunksperloop} chunks (nchunksperloop) the "
                       f"buffer holds; offsets are checked against {p.nchunksperloop}")
        if g.s_chunks < 0 or g.s_chunks > MAX_OFFSET + 1:
            f.error(f"{gw}: s_chunks={g.s_chunks} outside 0..{MAX_OFFSET + 1}", True)
        tb_ids = sorted(tb.id for tb in g.tbs)
        if tb_ids != list(range(len(tb_ids))):
            dup = sorted(k for k, v in Counter(tb_ids).items() if v > 1)
            f.error(f"{gw}: thread block ids {_ranges(tb_ids)} must be 0..{len(tb_ids) - 1} with no gaps"
                    + (f" (duplicates {dup})" if dup else ""), True)
        if len(g.tbs) > t.max_tbs:
            f.error(f"{gw}: {len(g.tbs)} thread blocks, over {t.executor}'s limit of {t.max_tbs} per GPU")
        elif len(g.tbs) > WARN_TBS:
            f.warn(f"{gw}: {len(g.tbs)} thread blocks, more than an A100 has SMs ({WARN_TBS})")


def check_parser(p: MscclProgram, f: Findings, t: Target = TARGETS[DEFAULT_TARGET]) -> None:
    """The XML parser's tables: children per node (gpus under ``<algo>``) and nodes per rank."""
    if len(p.gpus) > MAX_CHILDREN:
        f.error(f"algo: {len(p.gpus)} <gpu> elements, over the parser's {MAX_CHILDREN} children per node "
                f"(MSCCL XML cannot describe more than {MAX_CHILDREN} GPUs)")
    worst = max(p.gpus, key=lambda g: (parser_nodes(p, g), -g.id), default=None)
    if worst is not None and parser_nodes(p, worst) > MAX_PARSER_NODES:
        over = sum(parser_nodes(p, g) > MAX_PARSER_NODES for g in p.gpus)
        f.error(f"gpu {worst.id}: the parser stores {parser_nodes(p, worst)} nodes for this rank (<algo>, "
                f"{len(p.gpus)} <gpu>, {len(worst.tbs)} <tb>, {parser_nodes(p, worst) - 1 - len(p.gpus) - len(worst.tbs)} "
                f"<step>), over its limit of {MAX_PARSER_NODES}" + (f" ({over} ranks over it)" if over > 1 else ""))


def check_thread_blocks(p: MscclProgram, f: Findings, t: Target = TARGETS[DEFAULT_TARGET]) -> None:
    """``<tb>``: peers, channel, step count, nop-only blocks, one tb per connection, tbs per channel."""
    n = len(p.gpus)
    for g in p.gpus:
        gw = f"gpu {g.id}"
        conns: dict[tuple, list[int]] = defaultdict(list)
        for tb in g.tbs:
            tw = f"{gw} tb {tb.id}"
            for role, peer in (("send", tb.send), ("recv", tb.recv)):
                if peer == g.id or not -1 <= peer < n:
                    f.error(f"{tw}: {role}={peer} must be -1 or another gpu's id (0..{n - 1}, not {g.id})", True)
                elif peer >= 0:
                    conns[(role, peer, tb.chan)].append(tb.id)
            if not 0 <= tb.chan < max(p.nchannels, 1):
                f.error(f"{tw}: chan={tb.chan} must be in 0..{p.nchannels - 1} (nchannels={p.nchannels})", True)
            if len(tb.steps) > MAX_STEPS_PER_TB:
                f.error(f"{tw}: {len(tb.steps)} steps, over the executor's limit of {MAX_STEPS_PER_TB} steps per tb")
            if tb.steps and all(s.type == "nop" for s in tb.steps):
                if any(s.depid == tb.id for t2 in g.tbs for s in t2.steps):
                    f.error(f"{tw}: made only of nop steps yet other steps depend on it (it never signals: "
                            f"GPU deadlock)")
        for (role, peer, chan), tbs in sorted(conns.items()):
            if len(tbs) > 1:
                f.error(f"{gw}: thread blocks {tbs} all {role} {'to' if role == 'send' else 'from'} gpu {peer} on "
                        f"channel {chan}; one connection per (peer, channel, direction) allows one tb", True)
        for role in ("send", "recv"):
            per_chan = Counter(chan for (r, _, chan) in conns if r == role)
            for chan, cnt in sorted(per_chan.items()):
                if cnt > MAX_PEER_TBS_PER_CHANNEL:
                    f.error(f"{gw}: {cnt} {role} thread blocks on channel {chan}, over the limit of "
                            f"{MAX_PEER_TBS_PER_CHANNEL}")


def check_steps(p: MscclProgram, f: Findings, t: Target = TARGETS[DEFAULT_TARGET]) -> None:
    """``<step>``: numbering, types, the tb's roles, offsets, ``cnt``, buffer ranges, ``rcs``, nops."""
    for g in p.gpus:
        sizes = buffer_sizes(p, g)
        for tb in g.tbs:
            tw = f"gpu {g.id} tb {tb.id}"
            for pos, st in enumerate(tb.steps):
                sw = f"{tw} step {st.s}"
                if st.s != pos:
                    f.error(f"{tw}: step number {pos} has s={st.s}; s must be 0, 1, 2, ... in order", True)
                if st.type in REDUCE_TYPES:
                    f.error(f"{sw}: reduction step type {st.type!r} has no place in an all-to-all", True)
                    continue
                if st.type not in DATA_TYPES and st.type != "nop":
                    f.error(f"{sw}: unknown step type {st.type!r}", True)
                    continue
                if st.type in SENDS and tb.send < 0:
                    f.error(f"{sw}: {st.type!r} step in a tb with send=-1", True)
                if st.type in RECVS and tb.recv < 0:
                    f.error(f"{sw}: {st.type!r} step in a tb with recv=-1", True)
                for name in ("srcoff", "dstoff"):
                    v = getattr(st, name)
                    if not INT16[0] <= v <= INT16[1]:
                        f.error(f"{sw}: {name}={v} does not fit the executor's int16 offsets (<= {MAX_OFFSET})", True)
                if st.hasdep not in (0, 1):
                    f.error(f"{sw}: hasdep={st.hasdep} must be 0 or 1")
                if st.type == "nop":
                    if st.depid < 0:
                        f.error(f"{sw}: nop without a dependency (every nop must carry depid/deps)")
                    continue
                if not 1 <= st.cnt <= MAX_CNT:
                    f.error(f"{sw}: cnt={st.cnt} outside 1..{MAX_CNT}", True)
                reads, writes = DATA_TYPES[st.type]
                for used, bname, oname in ((reads, "srcbuf", "srcoff"), (writes, "dstbuf", "dstoff")):
                    buf, off = getattr(st, bname), getattr(st, oname)
                    if not used:
                        continue
                    if buf not in BUFFERS:
                        f.error(f"{sw}: {bname}={buf!r} must be i, o or s", True)
                    elif off < 0 or off + st.cnt > sizes[buf]:
                        f.error(f"{sw}: {bname}={buf} {oname}={off} cnt={st.cnt} is outside the "
                                f"{sizes[buf]}-chunk buffer", True)
                if writes and st.dstbuf == "i":
                    f.error(f"{sw}: writes the input buffer (out-of-place all-to-all never does)", True)
                if st.type == "rcs" and (st.srcbuf, st.srcoff) != (st.dstbuf, st.dstoff):
                    f.error(f"{sw}: rcs needs the same src and dst buffer and offset", True)


def check_dependencies(p: MscclProgram, f: Findings, t: Target = TARGETS[DEFAULT_TARGET]) -> None:
    """``depid``/``deps``: an existing step of another tb (or an earlier one of the same tb), marked ``hasdep``."""
    for g in p.gpus:
        steps_of = {tb.id: tb.steps for tb in g.tbs}
        for tb in g.tbs:
            for st in tb.steps:
                if st.depid == -1 and st.deps == -1:
                    continue
                sw = f"gpu {g.id} tb {tb.id} step {st.s}"
                if not 0 <= st.depid <= MAX_DEPID:
                    f.error(f"{sw}: depid={st.depid} outside 0..{MAX_DEPID} (int8 in the executor)", True)
                elif st.depid not in steps_of:
                    f.error(f"{sw}: depid={st.depid} names no thread block of gpu {g.id}", True)
                elif not 0 <= st.deps < len(steps_of[st.depid]):
                    f.error(f"{sw}: deps={st.deps} names no step of tb {st.depid} "
                            f"(it has {len(steps_of[st.depid])})", True)
                elif st.depid == tb.id and st.deps >= st.s:
                    f.error(f"{sw}: depends on step {st.deps} of its own thread block, which runs later "
                            f"(it waits forever)", True)
                elif steps_of[st.depid][st.deps].hasdep != 1:
                    f.error(f"{sw}: depends on tb {st.depid} step {st.deps}, which lacks hasdep=\"1\"")


def check_connections(p: MscclProgram, f: Findings) -> None:
    """Each (sender tb, receiver tb) pair carries the same number of messages with matching ``cnt``.

    A receive whose ``srcbuf/srcoff/dstbuf/dstoff`` differ from its send's
    (:func:`message_fields`) is a warning: the executor only uses the local
    fields, but msccl-tools and the public simulator expect both ends alike.
    Assumes the structural rules passed (one tb per connection end).
    """
    mismatched: list[str] = []
    ends: dict[tuple[int, int, int], dict[str, tuple]] = defaultdict(dict)
    for g in p.gpus:
        for tb in g.tbs:
            if tb.send >= 0:
                ends[(g.id, tb.send, tb.chan)]["s"] = (tb, [s for s in tb.steps if s.type in SENDS])
            if tb.recv >= 0:
                ends[(tb.recv, g.id, tb.chan)]["r"] = (tb, [s for s in tb.steps if s.type in RECVS])
    for (a, b, chan), e in sorted(ends.items()):
        snd, rcv = e.get("s"), e.get("r")
        n_s = len(snd[1]) if snd else 0
        n_r = len(rcv[1]) if rcv else 0
        if n_s and not rcv:
            f.error(f"gpu {a} tb {snd[0].id}: sends {n_s} message(s) to gpu {b} on channel {chan}, but gpu {b} "
                    f"has no thread block receiving from gpu {a} on channel {chan} (send with no matching receive)")
        elif n_r and not snd:
            f.error(f"gpu {b} tb {rcv[0].id}: receives {n_r} message(s) from gpu {a} on channel {chan}, but gpu "
                    f"{a} has no thread block sending to gpu {b} on channel {chan} (receive with no matching send)")
        elif n_s != n_r:
            f.error(f"gpu {a} tb {snd[0].id} sends {n_s} message(s) to gpu {b} on channel {chan}, but gpu {b} "
                    f"tb {rcv[0].id} receives {n_r} (send with no matching receive)" if n_s > n_r else
                    f"gpu {b} tb {rcv[0].id} receives {n_r} message(s) from gpu {a} on channel {chan}, but gpu "
                    f"{a} tb {snd[0].id} sends {n_s} (receive with no matching send)")
        elif snd:
            for k, (x, y) in enumerate(zip(snd[1], rcv[1])):
                if x.cnt != y.cnt:
                    f.error(f"gpu {a} tb {snd[0].id} step {x.s} sends cnt={x.cnt} but its matching receive, "
                            f"gpu {b} tb {rcv[0].id} step {y.s} (message {k} on channel {chan}), has cnt={y.cnt}")
                    break
            for k, (x, y) in enumerate(zip(snd[1], rcv[1])):
                sent, got = message_fields(x), (y.srcbuf, y.srcoff, y.dstbuf, y.dstoff)
                if sent != got:
                    mismatched.append(f"gpu {b} tb {rcv[0].id} step {y.s} receives with srcbuf/srcoff/dstbuf/dstoff "
                                      f"= {_fields(got)} but its send, gpu {a} tb {snd[0].id} step {x.s} (message {k} "
                                      f"on channel {chan}), describes {_fields(sent)}")
    if mismatched:
        f.warn(f"{mismatched[0]}; msccl-tools writes both ends of a transfer alike and the public "
               f"MSCCL-XML-Verifier rejects a difference as 'Message mismatch'"
               + (f" ({len(mismatched) - 1} more receive(s) like it)" if len(mismatched) > 1 else ""))


def message_fields(step) -> tuple:
    """``(srcbuf, srcoff, dstbuf, dstoff)`` a send step puts on its connection, by msccl-tools'
    convention: a send describes its source and the receiver's destination; an ``rcs``
    forwards what it received from its own slot (``src = dst``).  The matching receive
    repeats the same four fields."""
    if step.type == "rcs":
        return step.dstbuf, step.dstoff, step.dstbuf, step.dstoff
    return step.srcbuf, step.srcoff, step.dstbuf, step.dstoff


def _fields(f: tuple) -> str:
    return f"{f[0]}/{f[1]}/{f[2]}/{f[3]}"


def _ranges(ids: list[int]) -> str:
    return "[" + ", ".join(map(str, ids[:8])) + (", ..." if len(ids) > 8 else "") + "]"


# ------------------------------------------------------- sizes the executors select


#: Per-peer message sizes (bytes) an all-to-all is typically run at: ``compile --target`` chooses a chunk
#: count the executor selects at these, and ``verify`` warns about a file it selects at none of them.
TYPICAL_PEER_BYTES = (1 << 20, 64 << 20)
#: Element sizes (bytes) of the collective libraries' data types: int8/fp8, half/bf16, float/int32, double/int64.
ELEMENT_BYTES = (1, 2, 4, 8)
#: Largest power of two (bytes per peer) the size rules are described up to: 1 TiB.
MAX_POWER = 40


@dataclass(frozen=True)
class SizeRule:
    """The all-to-all sizes an executor runs a file for: ``ranks`` ranks, a per-peer size that is a
    multiple of ``quantum`` elements (``per_element``) or bytes, and a total over the ranks
    (``ranks`` x per-peer bytes) within ``[min_total, max_total]`` (``max_total`` 0: no limit).
    ``otherwise``: what happens at any other size.  Built by :func:`msccl_size_rule` and
    :func:`mscclpp_size_rule`, which cite the executors' source."""

    executor: str
    ranks: int
    quantum: int
    per_element: bool
    min_total: int
    max_total: int
    otherwise: str

    def admits(self, peer_bytes: int, element_bytes: int = 4) -> bool:
        """Whether the executor runs the file for ``peer_bytes`` per peer in elements of ``element_bytes``."""
        if peer_bytes <= 0 or peer_bytes % element_bytes:
            return False
        total = peer_bytes * self.ranks
        return (peer_bytes % (self.quantum * (element_bytes if self.per_element else 1)) == 0
                and total >= self.min_total and (not self.max_total or total <= self.max_total))

    def typical(self) -> tuple[int, ...]:
        """The :data:`TYPICAL_PEER_BYTES` it is selected at, whatever the data type (:data:`ELEMENT_BYTES`)."""
        return tuple(b for b in TYPICAL_PEER_BYTES if all(self.admits(b, s) for s in ELEMENT_BYTES))

    def powers_of_two(self) -> tuple[int, int] | None:
        """The smallest and largest power-of-two per-peer size (up to 2^:data:`MAX_POWER` bytes) it is selected
        at whatever the data type, ``None`` when there is none: the sizes users send."""
        ok = [1 << k for k in range(MAX_POWER + 1) if all(self.admits(1 << k, s) for s in ELEMENT_BYTES)]
        return (ok[0], ok[-1]) if ok else None

    def rule(self) -> str:
        """The rule in words: ``per-peer sizes a multiple of 3 elements``, with the byte range if any."""
        unit = "element" if self.per_element else "byte"
        text = f"per-peer sizes a multiple of {self.quantum} {unit}{'s' if self.quantum > 1 else ''}"
        if self.min_total or self.max_total:
            text += (f", {self.min_total} to {self.max_total or 'any number of'} bytes over the {self.ranks} "
                     f"ranks")
        return text

    def describe(self) -> str:
        """One line: the rule, and the power-of-two sizes it serves (what runs at the others)."""
        p = self.powers_of_two()
        if p is None:
            return f"{self.executor} runs it at {self.rule()}: at no power-of-two size ({self.otherwise})"
        top = "up" if p[1] == 1 << MAX_POWER else f"to {_size(p[1])}"
        return f"{self.executor} runs it at {self.rule()}: every power of two from {_size(p[0])} {top} per peer"

    def to_json_dict(self) -> dict:
        """``sizes`` of ``compile --json`` and ``verify --json`` (docs/json.md)."""
        return {"executor": self.executor, "quantum": self.quantum,
                "unit": "elements" if self.per_element else "bytes", "min_total_bytes": self.min_total,
                "max_total_bytes": self.max_total, "typical_peer_bytes": list(self.typical()),
                "powers_of_two": None if self.powers_of_two() is None else list(self.powers_of_two()),
                "rule": self.rule()}


def _size(b: int) -> str:
    for shift, unit in ((40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return f"{b >> shift} {unit}"
    return f"{b} B"


def msccl_size_rule(p: MscclProgram, target: str | Target = DEFAULT_TARGET) -> SizeRule:
    """When an MSCCL executor runs ``p`` for ``ncclAllToAll(count, datatype)`` (``count`` elements per peer).

    msccl-executor-nccl, ``src/misc/msccl/msccl_lifecycle.cc`` l.330-339 (``mscclInternalSchedulerSelectAlgo``):
    the first loaded algorithm with ``count > 0``, ``(count * sizeMultiplier) % nChunksPerLoop == 0``,
    ``minBytes <= count * typesize * sizeMultiplier`` (``<= maxBytes`` unless 0), the communicator's
    ``nRanks`` and out-of-place buffers; ``sizeMultiplier`` is ``ngpus`` for ``coll="alltoall"``
    (``msccl_parser.cc`` l.763-765).  So ``count`` must be a multiple of
    ``nchunksperloop / gcd(nchunksperloop, ngpus)`` elements (chunks per peer, for our files).
    Otherwise ``mscclEnqueueCheck`` (l.472-482) falls back silently to NCCL's own all-to-all
    (``collectives.cc`` l.298-309: one send and receive per peer).  RCCL's copy of the scheduler
    applies the same test.
    """
    import math

    t = get_target(target)
    ncl = max(p.nchunksperloop, 1)
    return SizeRule(t.name, p.ngpus, ncl // math.gcd(ncl, max(p.ngpus, 1)), True, p.min_bytes, p.max_bytes,
                    f"{t.name.upper()}'s own all-to-all runs instead, silently")


def mscclpp_size_rule(p) -> SizeRule:
    """When the MSCCL++ executor runs plan ``p`` (an :class:`~a2a_compiler.formats.mscclpp.MscclppProgram`).

    microsoft/mscclpp 1f5f065d, ``src/core/executor/execution_plan.cc`` l.299-311 (``checkMessageSize``,
    called by ``loadExecutionPlan`` and ``lightLoadExecutionPlan``, l.263 and l.295): the input size
    (all ``nranks`` peers' bytes, ``Executor::execute``'s ``sendBuffSize``, ``executor.cc`` l.548-563) must be
    a multiple of ``buffer_alignment`` (default 16, l.131) with ``(inputSize / buffer_alignment) % input_chunks
    == 0``, and lie within ``[min_message_size, max_message_size]`` (l.132-133); so a per-peer size a multiple
    of ``buffer_alignment * input_chunks / gcd(.., nranks)`` bytes.  Otherwise the executor throws
    ``"Input or output size is not aligned with buffer alignment or chunks"``: there is no fallback (its
    NCCL interface has no all-to-all: ``src/ext/nccl/nccl.cc`` l.794-805).  An all-to-allv plan has the
    same fixed-size buffers of ``input_chunks = output_chunks = nranks·C`` chunks (pairs laid out by
    :func:`~a2a_compiler.chunk.counts.msccl_counts`), so the rule holds with the per-peer size read as
    the buffer's bytes over ``nranks``.
    """
    import math

    opts = dict(p.options)

    def whole(key, default):
        v = opts.get(key, default)
        return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else default

    align = max(whole("buffer_alignment", 16), 1)
    chunks = max(p.gpus[0].input_chunks if p.gpus else 1, 1)
    n = max(p.nranks, 1)
    top = whole("max_message_size", 0)
    return SizeRule("mscclpp", p.nranks, align * chunks // math.gcd(align * chunks, n), False,
                    whole("min_message_size", 0), 0 if top >= 2**64 - 1 else top,
                    "the executor throws 'Input or output size is not aligned with buffer alignment or chunks'")


def is_power_of_two(c: int) -> bool:
    """Whether ``c`` chunks per peer divide every power-of-two count from ``c`` up (what compile's
    ``--target`` and MSCCL++ plans choose among, so that :data:`TYPICAL_PEER_BYTES` qualify)."""
    return c >= 1 and c & (c - 1) == 0
