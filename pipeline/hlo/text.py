"""Reading XLA HLO module text into computations and instructions (no semantics beyond the syntax).

Accepted: what `jax.jit(f).lower(...).as_text(dialect="hlo")` prints (bare names, `ENTRY main.8 {`), what
`.compile().as_text()` and `XLA_FLAGS=--xla_dump_to=DIR` dumps print (`%` names, signatures, layouts with tiles
`{1,0:T(8,128)}`, operands with or without their shapes, metadata, backend configs (also over lines, a `}` alone
on a line closing a brace), and the `FileNames` / `FunctionNames` / `FileLocations` / `StackFrames` blocks, which are
skipped), with `// ...` comments to the end of any line and `/* ... */` comments anywhere (`/*index=5*/`, a note
before the module), as XLA's lexer skips them. Element types: XLA's (`s1` ... `f8e8m0fnu`)
and later widths of its integer and float families.

Refused as XLA's parser refuses them: two computations of one name, two ENTRY computations, two ROOTs in one
computation, a layout that does not list each dimension of its shape once.
A statement may span lines while a bracket or string is open or a line ends with ','. Every problem raises `HloParseError`, one line:
`<source>:<line>: expected <what>, found <what>`. A bounded dynamic dimension (`<=8`) reads as its bound, the size XLA
allocates and its Shape proto (so the official featurizer) holds; an unbounded one (`?`) is refused.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import cached_property

from pipeline.errors import PipelineError, shortened
from pipeline.files import INT64_MAX
from pipeline.hlo.lexing import CLOSE, closing, first_line, pieces, scan_brackets, split_top, strip_comments, tokens

# Element types XLA prints; the official one-hot has 19 of them (the rest get an all-zero one-hot, as there).
# Integer and float types of any width (s1, u1, f6e2m3fn, ... and those XLA adds later) match the families' pattern.
ELEMENT_TYPES = frozenset({"pred", "s1", "s2", "s4", "s8", "s16", "s32", "s64", "u1", "u2", "u4", "u8", "u16", "u32",
                           "u64", "f16", "f32", "f64", "bf16", "c64", "c128", "token", "opaque", "f4e2m1fn", "f6e2m3fn",
                           "f6e3m2fn", "f8e3m4", "f8e4m3", "f8e4m3fn", "f8e4m3b11fnuz", "f8e4m3fnuz", "f8e5m2",
                           "f8e5m2fnuz", "f8e8m0fnu"})
_ELEMENT_FAMILY = re.compile(r"[su]\d{1,2}|f\d{1,2}e\d{1,2}m\d{1,2}[a-z]*")
MAX_ELEMENTS = INT64_MAX            # XLA sizes a shape (each dim and the element count) in int64
METADATA_BLOCKS = frozenset({"FileNames", "FunctionNames", "FileLocations", "StackFrames"})
# First lines of the texts passed by mistake for HLO text, and what they are.
NOT_HLO_TEXT = ((re.compile(r"(module\b|func\.func\b|#loc|\"?(stablehlo|mhlo)\.)"), "StableHLO/MLIR text"),
                (re.compile(r"(name|id|entry_computation_name|computations|host_program_shape)\s*[:{]"),
                 "an HloModuleProto in protobuf text format"))
HLO_TEXT_HINT = "(HLO text: `jax.jit(f).lower(...).as_text(dialect=\"hlo\")`, `.compile().as_text()` or an XLA dump)"
_NAME = r"%?([A-Za-z_][\w.\-]*)"
_INSTRUCTION = re.compile(r"\s*(ROOT\s+)?" + _NAME + r"\s*=\s*")
_STARTS_INSTRUCTION = re.compile(r"(ROOT\s+)?" + _NAME + r"\s*=\s*(\(|[a-z][a-z0-9]*\[)")
_OPCODE = re.compile(r"\s*([a-z][a-z0-9\-]*)\(")
UNBOUNDED = "static or bounded dimension sizes (unbounded dynamic dimensions '?' are not supported)"
_ARRAY = re.compile(r"([a-z][a-z0-9]*)\[([^\]]*)\]")
_SPACES = re.compile(r"\s*")
# the arrays of a module header, each found from the start of its type name: unanchored, _ARRAY retried a long
# word (a module name of 80 000 letters) from each of its letters, 20 s of backtracking
_HEADER_ARRAY = re.compile(r"(?<![a-z0-9])" + _ARRAY.pattern)
_HEADER = re.compile(r"(ENTRY\s+)?" + _NAME + r"\s*(\(.*)?\{$")    # no signature, or one that opens with '('
_SCHEDULED = re.compile(r"\bis_scheduled=true\b")
_CLOSE = re.compile(r'\}(\s*,\s*execution_thread\s*=\s*"[^"\\]*")?')   # a computation's end; XLA adds the
                                                                    # thread of one off the main thread (host, async)


class HloParseError(PipelineError):
    """Malformed or unsupported HLO text; the message is one line naming the source and the line."""

    def __init__(self, source: str, line: int, expected: str, found: str | None = None):
        self.source, self.line = source, line
        found_text = "" if found is None else f", found {shortened(found)}"
        super().__init__(f"{source}:{line}: expected {expected}{found_text}")


@dataclass(frozen=True)
class Shape:
    """An array shape (`element_type`, `dims`, `layout` minor-to-major or None when not written) or a tuple."""

    element_type: str                       # "f32", "bf16", ..., or "tuple"
    dims: tuple[int, ...] = ()
    layout: tuple[int, ...] | None = None
    tuple_shapes: tuple["Shape", ...] = ()

    @property
    def is_tuple(self) -> bool:
        return self.element_type == "tuple"


@dataclass(frozen=True)
class Instruction:
    name: str
    opcode: str
    shape: Shape
    operands: tuple[str, ...]               # operand instruction names, in order
    attrs: dict[str, str] = field(hash=False)   # raw attribute text by key, e.g. {"dimensions": "{0,1}"}
    payload: str = ""                       # text inside the parentheses of constant(...) / parameter(...)
    is_root: bool = False
    line: int = 0


@dataclass(frozen=True)
class Computation:
    name: str
    instructions: tuple[Instruction, ...]
    is_entry: bool
    line: int

    @property
    def root(self) -> Instruction:
        """The ROOT instruction (the last one when none is marked, as XLA's parser does)."""
        return next((i for i in self.instructions if i.is_root), self.instructions[-1])


@dataclass(frozen=True)
class HloModule:
    name: str
    source: str
    computations: tuple[Computation, ...]
    scheduled: bool = False                 # `is_scheduled=true` on the HloModule line: the compiler's output
    graphs: dict = field(default_factory=dict, compare=False, repr=False)   # built graphs (pipeline.hlo.lower)

    @property
    def entry(self) -> Computation:
        """The ENTRY computation (the last one when none is marked)."""
        return next((c for c in self.computations if c.is_entry), self.computations[-1])

    def computation(self, name: str) -> Computation:
        return next(c for c in self.computations if c.name == name)

    @cached_property
    def computation_names(self) -> frozenset[str]:
        """Every computation's name (computed once: callers check each called name against it)."""
        return frozenset(c.name for c in self.computations)


def is_element_type(name: str) -> bool:
    """True for an HLO element type name (`f32`, `s4`, `f8e4m3fn`, ...; not `tuple`)."""
    return name in ELEMENT_TYPES or _ELEMENT_FAMILY.fullmatch(name) is not None


class _Reader:
    """Parses one module text; `fail` raises HloParseError at a line."""

    def __init__(self, text: str, source: str):
        self.lines = strip_comments(text.removeprefix("\ufeff")).splitlines()         # a UTF-8 BOM is no text
        self.source = source

    def fail(self, line: int, expected: str, found: str | None = None) -> HloParseError:
        return HloParseError(self.source, line, expected, found)

    def shape(self, text: str, pos: int, line: int) -> tuple[Shape, int]:
        """Parse a shape at text[pos:]; returns it and the position after it. Tuples nest to any depth in one pass
        (no recursion: a tuple nested 3000 deep was a RecursionError)."""
        start, open_tuples = pos, []                # the elements so far of each tuple open here, innermost last
        while True:
            pos = _SPACES.match(text, pos).end()
            if text.startswith("(", pos):
                open_tuples.append([])
                pos = _SPACES.match(text, pos + 1).end()
                if not text.startswith(")", pos):   # `()` is the empty tuple, closed below
                    continue
            else:
                element, pos = self.array(text, pos, line)
                if not open_tuples:
                    return element, pos
                open_tuples[-1].append(element)
                pos = _SPACES.match(text, pos).end()
            while text.startswith(")", pos):
                element, pos = Shape("tuple", tuple_shapes=tuple(open_tuples.pop())), pos + 1
                if not open_tuples:
                    return element, pos
                open_tuples[-1].append(element)
                pos = _SPACES.match(text, pos).end()
            if not text.startswith(",", pos):
                raise self.fail(line, "',' or ')' after an element of a tuple shape", text[pos:] or text[start:])
            pos += 1

    def array(self, text: str, pos: int, line: int) -> tuple[Shape, int]:
        """Parse an array shape (`f32[8,16]{1,0}`) at text[pos:]; returns it and the position after it."""
        m = _ARRAY.match(text, pos)
        if not m or not is_element_type(m.group(1)):
            raise self.fail(line, "a shape such as f32[8,16]{1,0} or a tuple (...)", text[pos:pos + 40])
        dims = []
        for d in split_top(m.group(2)):
            if d == "?":
                raise self.fail(line, UNBOUNDED, m.group(0))
            d = d.removeprefix("<=")        # a bounded dynamic dim: its bound, what XLA's Shape proto holds
            if not (d.isascii() and d.isdigit()):     # str.isdigit alone takes '٣' and '³' (int() refuses '³')
                raise self.fail(line, "a dimension size (a non-negative integer)", d)
            dims.append(int(d) if len(d.lstrip("0")) <= 19 else MAX_ELEMENTS + 1)   # int() raises past 4300 digits
        if max(dims, default=0) > MAX_ELEMENTS or math.prod(dims) > MAX_ELEMENTS:
            raise self.fail(line, f"a shape of at most {MAX_ELEMENTS} elements (XLA's int64 sizes)", m.group(0))
        pos, layout = m.end(), None
        if text.startswith("{", pos):
            end = closing(text, pos)
            if end < 0:
                raise self.fail(line, "'}' closing a layout", text[pos:])
            minor = text[pos + 1:end].split(":")[0]
            layout = tuple(split_top(minor))
            if not all(v.isascii() and v.isdigit() and len(v) <= 19 for v in layout):   # not '٣', '1_0', '+1'
                raise self.fail(line, "a layout {minor-to-major dims}", text[pos:end + 1])
            layout = tuple(int(v) for v in layout)
            if sorted(layout) != list(range(len(dims))):
                raise self.fail(line, f"a layout listing each of the {len(dims)} dimensions once",
                                m.group(0) + text[pos:end + 1])
            pos = end + 1
        return Shape(m.group(1), tuple(dims), layout), pos

    def instruction(self, text: str, line: int) -> Instruction:
        m = _INSTRUCTION.match(text)
        if not m:
            raise self.fail(line, "an instruction 'NAME = SHAPE OPCODE(OPERANDS), ATTRS'", text.strip())
        shape, pos = self.shape(text, m.end(), line)
        op = _OPCODE.match(text, pos)
        if not op:
            raise self.fail(line, f"an opcode followed by '(' after the shape of {m.group(2)}", text[pos:].strip())
        start = op.end() - 1
        inner_cuts, outer_cuts, end = [start], [], -1   # one pass: operand commas, ')' and attribute commas
        for i, ch, depth in tokens(text[start:]):
            if end >= 0:
                if ch == "," and depth == 0:
                    outer_cuts.append(start + i)
            elif ch == "," and depth == 1:
                inner_cuts.append(start + i)
            elif depth == 0 and ch in CLOSE:
                end = start + i
        if end < 0:
            raise self.fail(line, f"')' closing the operands of {m.group(2)}", text[start:].strip())
        inner, rest = text[start + 1:end], text[end + 1:].strip()
        opcode = op.group(1)
        operands: tuple[str, ...] = ()
        if opcode not in ("constant", "parameter") and inner.strip():
            names = [(p.rsplit(None, 1) or [""])[-1] for p in pieces(text, inner_cuts + [end])]   # "" = (a,,b)
            bad = [n for n in names if not re.fullmatch(_NAME, n)]
            if bad:
                raise self.fail(line, f"operand names of {m.group(2)}", bad[0])
            operands = tuple(n.lstrip("%") for n in names)
        attrs = {}
        if rest:
            if not outer_cuts or text[end + 1:outer_cuts[0]].strip():
                raise self.fail(line, f"',' before the attributes of {m.group(2)}", rest)
            for item in pieces(text, outer_cuts + [len(text)]):
                key, eq, value = item.partition("=")
                if not eq or not re.fullmatch(r"[A-Za-z_][\w\-]*", key.strip()):
                    raise self.fail(line, f"an attribute 'key=value' of {m.group(2)}", item)
                attrs[key.strip()] = value.strip()
        return Instruction(m.group(2), opcode, shape, operands, attrs, inner.strip() if not operands else "",
                           bool(m.group(1)), line)

    def statements(self, start: int, name: str):
        """Yield (line, text) of each statement of the computation opened on line `start`; ends after its '}'."""
        i = start
        while True:
            i += 1
            if i > len(self.lines):
                raise self.fail(len(self.lines), f"'}}' closing computation {name} (the text ends inside it)")
            raw = self.lines[i - 1].strip()
            if not raw:                                     # comments are blank here (strip_comments)
                continue
            if _CLOSE.fullmatch(raw):                       # a thread other than main is not a column: skipped
                self.pos = i
                return
            first, parts, stack = i, [raw], []
            in_string = scan_brackets(raw, stack, False)       # line by line: linear in the statement's length
            while stack or in_string or parts[-1].endswith(","):
                i += 1
                following = self.lines[i - 1].strip() if i <= len(self.lines) else None
                closes_a_brace = following == "}" and stack[-1:] == ["{"]     # a backend_config={ ... } over lines
                if following is None or (_CLOSE.fullmatch(following) and not closes_a_brace) \
                        or _STARTS_INSTRUCTION.match(following):
                    raise self.fail(first, "a complete instruction (a bracket or string is never closed)", raw)
                in_string = scan_brackets(following, stack, in_string)
                parts.append(following)
            yield first, " ".join(parts)

    def module(self) -> HloModule:
        # the first line that is neither blank nor a comment (comments are blank here: strip_comments)
        at, first = first_line(self.lines)
        if not first.startswith("HloModule"):
            kind = next((what for pattern, what in NOT_HLO_TEXT if pattern.match(first)), None)
            found = first if kind is None else f"{kind}: {first}"
            raise self.fail(at, f"'HloModule NAME, ...' as the first line {HLO_TEXT_HINT}", found)
        header = first.split(None, 1)
        if len(header) < 2:
            raise self.fail(at, "a module name after 'HloModule'", first)
        for array in _HEADER_ARRAY.finditer(first):      # entry_computation_layout={(f32[?]{0})->...}
            if is_element_type(array.group(1)) and any(d.strip() == "?" for d in array.group(2).split(",")):
                raise self.fail(at, UNBOUNDED, array.group(0))
        name = header[1].split(",")[0].strip()
        computations, self.pos, in_block = [], at, False
        by_name: dict[str, Computation] = {}            # computations so far by name, and the ENTRY one
        entry: Computation | None = None
        while self.pos < len(self.lines):
            self.pos += 1
            line = self.lines[self.pos - 1].strip()
            if not line:
                in_block = False
                continue
            if line in METADATA_BLOCKS or (in_block and re.match(r"\d+\s", line)):
                in_block = True
                continue
            in_block = False
            m = _HEADER.match(line)
            if not m:
                raise self.fail(self.pos, "a computation header 'NAME {' or 'ENTRY NAME (...) -> SHAPE {'", line)
            start = self.pos
            body = tuple(self.instruction(text, k) for k, text in self.statements(start, m.group(2)))
            if not body:
                raise self.fail(start, f"at least one instruction in computation {m.group(2)}")
            roots = [inst for inst in body if inst.is_root]
            if len(roots) > 1:
                raise self.fail(roots[1].line, f"one ROOT instruction in computation {m.group(2)} (the first is "
                                               f"{roots[0].name} on line {roots[0].line})", roots[1].name)
            earlier = by_name.get(m.group(2)) or (entry if m.group(1) else None)   # one lookup per computation
            if earlier is not None:
                what = "a computation name not used before" if earlier.name == m.group(2) else "one ENTRY computation"
                raise self.fail(start, f"{what} ({earlier.name} is on line {earlier.line})", m.group(2))
            computations.append(Computation(m.group(2), body, bool(m.group(1)), start))
            by_name[m.group(2)] = computations[-1]
            entry = computations[-1] if m.group(1) else entry
        if not computations:
            raise self.fail(len(self.lines), "at least one computation after the HloModule line")
        scheduled = _SCHEDULED.search(first) is not None     # XLA prints it on optimised text only
        return HloModule(name, self.source, tuple(computations), scheduled)


def parse_text(text: str, source: str = "<text>") -> HloModule:
    """Parse HLO module text (syntax only); raises HloParseError naming `source` and the line."""
    return _Reader(text, source).module()
