"""Mutant generation: one C file's syntax tree (libclang) walked for the places where a
one-line defect can be planted, each mutant a text edit (offset, length, replacement).

Operators (the key's second field names them):
  negate_cond     an if/while/for/do/?: condition C becomes !(C)
  cmp_flip        < and >, <= and >=, == and != exchanged
  cmp_inclusive   < becomes <=, > becomes >= and back
  logic_swap      && and || exchanged
  const_plus1     an integer constant n becomes n+1
  const_minus1    an integer constant n becomes n-1
  arith           + and -, * and /, % and *, << and >> exchanged (compound forms too)
  var_replace     a local variable or parameter read replaced by another of its type,
                  declared before it in the same function
  return_ok       a returned status (gaaw_status_t, or -1 from an int function)
                  replaced by success
  ignore_status   a call whose status is used is still made, its status taken as success
  delete_stmt     an expression statement (a call, an assignment, ++/--) deleted

A mutant is keyed, for equivalent.txt and accepted.txt, by file, function, operator,
original text and occurrence (the how-manieth mutant of that file, function, operator
and text in source order), never by line number, so edits above it do not move it.
"""
import os

from clang import cindex

LIBCLANG = "/usr/lib/llvm-14/lib/libclang.so.1"

CMP_FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "==": "!=", "!=": "=="}
CMP_INCLUSIVE = {"<": "<=", ">": ">=", "<=": "<", ">=": ">"}
LOGIC = {"&&": "||", "||": "&&"}
ARITH = {"+": "-", "-": "+", "*": "/", "/": "*", "%": "*", "<<": ">>", ">>": "<<",
         "+=": "-=", "-=": "+=", "*=": "/=", "/=": "*=", "<<=": ">>=", ">>=": "<<="}
# int-returning calls whose 0 is success: ignoring their status is a planted defect too
INT_STATUS_CALLS = {"fsync", "fdatasync", "close", "rename", "ftruncate", "fclose", "fflush",
                    "unlink", "mkdir", "posix_fallocate", "fstat", "stat", "truncate", "munmap",
                    "renameat", "fsetpos", "pthread_create", "pthread_join"}
STATUS_TYPE = "gaaw_status_t"

K = cindex.CursorKind


class Mutant:
    __slots__ = ("file", "function", "op", "original", "replacement", "offset", "length",
                 "line", "occurrence", "function_line")

    def __init__(self, file, function, op, original, replacement, offset, length, line):
        self.file, self.function, self.op = file, function, op
        self.original, self.replacement = original, replacement
        self.offset, self.length, self.line = offset, length, line
        self.occurrence = 0
        self.function_line = 0   # where its function starts (runner.py's coverage lookup)

    def key(self):
        one_line = " ".join(self.original.split())
        return "\t".join([self.file, self.function, self.op, one_line, str(self.occurrence)])

    def apply(self, text):
        return text[:self.offset] + self.replacement + text[self.offset + self.length:]

    def describe(self):
        orig = " ".join(self.original.split())
        repl = " ".join(self.replacement.split())
        return "%s:%d (%s) %s: `%s` -> `%s`" % (self.file, self.line, self.function, self.op,
                                                 orig[:80], repl[:80])


def _init_libclang():
    if not cindex.Config.loaded:
        cindex.Config.set_library_file(LIBCLANG)


class _Walker:
    def __init__(self, rel, path, data, tu):
        self.rel, self.path, self.data, self.tu = rel, path, data, tu
        self.mutants = []

    # --- extents and tokens ---------------------------------------------------------
    def in_file(self, cursor):
        ext = cursor.extent
        return (ext.start.file is not None and ext.end.file is not None
                and os.path.samefile(ext.start.file.name, self.path)
                and os.path.samefile(ext.end.file.name, self.path)
                and ext.end.offset > ext.start.offset)

    def span(self, cursor):
        return cursor.extent.start.offset, cursor.extent.end.offset

    def src(self, a, b):
        return self.data[a:b].decode("utf-8", "replace")

    def add(self, function, op, a, b, replacement, line):
        original = self.src(a, b)
        if original == replacement:
            return
        m = Mutant(self.rel, function, op, original, replacement, a, b - a, line)
        m.function_line = self.function_line
        self.mutants.append(m)

    def tokens_between(self, cursor, a, b):
        return [t for t in cursor.get_tokens()
                if t.extent.start.offset >= a and t.extent.end.offset <= b
                and t.kind == cindex.TokenKind.PUNCTUATION]

    # --- the walk ---------------------------------------------------------------------
    def walk_functions(self):
        for c in self.tu.cursor.get_children():
            if c.kind == K.FUNCTION_DECL and c.is_definition() and self.in_file(c):
                self.function = c.spelling
                self.function_line = c.extent.start.line
                self.locals = []   # (offset, cursor, canonical type) of params and locals
                self.return_type = c.result_type.spelling
                for p in c.get_arguments():
                    if p.spelling:
                        self.locals.append((p.extent.start.offset, p.spelling,
                                            p.type.get_canonical().spelling))
                for child in c.get_children():
                    if child.kind == K.COMPOUND_STMT:
                        self.visit(child, None)
        return self.mutants

    def visit(self, cursor, parent):
        kind = cursor.kind
        if kind == K.VAR_DECL and self.in_file(cursor):
            self.locals.append((cursor.extent.start.offset, cursor.spelling,
                                cursor.type.get_canonical().spelling))
        if self.in_file(cursor):
            handler = _HANDLERS.get(kind)
            if handler:
                handler(self, cursor, parent)
            if parent is not None and parent.kind == K.COMPOUND_STMT:
                self.maybe_delete(cursor)
        for child in cursor.get_children():
            self.visit(child, cursor)

    # --- operators --------------------------------------------------------------------
    def condition(self, cursor, parent):
        """negate_cond on the condition child of an if, while, do, for or ?:."""
        children = list(cursor.get_children())
        cond = None
        if cursor.kind in (K.IF_STMT, K.WHILE_STMT, K.CONDITIONAL_OPERATOR) and children:
            cond = children[0]
        elif cursor.kind == K.DO_STMT and len(children) >= 2:
            cond = children[-1]
        elif cursor.kind == K.FOR_STMT:
            cond = self.for_condition(cursor, children)
        if cond is None or not self.in_file(cond):
            return
        a, b = self.span(cond)
        text = self.src(a, b)
        self.add(self.function, "negate_cond", a, b, "!(%s)" % text, cond.extent.start.line)

    def for_condition(self, cursor, children):
        """The condition of for (init; cond; inc): the child lying between the two ';'."""
        semis = [t.extent.start.offset for t in cursor.get_tokens() if t.spelling == ";"]
        if len(semis) < 2:
            return None
        for ch in children:
            a, b = self.span(ch)
            if a > semis[0] and b <= semis[1]:
                return ch
        return None

    def binary(self, cursor, parent):
        children = list(cursor.get_children())
        if len(children) != 2 or not all(self.in_file(c) for c in children):
            return
        lhs_end = children[0].extent.end.offset
        rhs_start = children[1].extent.start.offset
        if rhs_start <= lhs_end:
            return
        toks = self.tokens_between(cursor, lhs_end, rhs_start)
        if len(toks) != 1:
            return
        tok = toks[0]
        op = tok.spelling
        a, b = tok.extent.start.offset, tok.extent.end.offset
        line = tok.extent.start.line
        # the original text kept in the key: the whole expression, so the key says where
        ea, eb = self.span(cursor)
        def edit(opname, repl):
            expr = self.src(ea, a) + repl + self.src(b, eb)
            self.add(self.function, opname, ea, eb, expr, line)
        if op in CMP_FLIP:
            edit("cmp_flip", CMP_FLIP[op])
        if op in CMP_INCLUSIVE:
            edit("cmp_inclusive", CMP_INCLUSIVE[op])
        if op in LOGIC:
            edit("logic_swap", LOGIC[op])
        if op in ARITH:
            edit("arith", ARITH[op])

    def integer(self, cursor, parent):
        a, b = self.span(cursor)
        text = self.src(a, b)
        digits = text.rstrip("uUlL")
        suffix = text[len(digits):]
        try:
            value = int(digits, 0) if not (len(digits) > 1 and digits[0] == "0" and digits[1].isdigit()) \
                else int(digits, 8)
        except ValueError:
            return
        line = cursor.extent.start.line
        self.add(self.function, "const_plus1", a, b, "%d%s" % (value + 1, suffix), line)
        if value > 0 or not suffix.lower().startswith("u"):
            self.add(self.function, "const_minus1", a, b, "(%d%s)" % (value - 1, suffix)
                     if value == 0 else "%d%s" % (value - 1, suffix), line)

    def decl_ref(self, cursor, parent):
        ref = cursor.referenced
        if ref is None or ref.kind not in (K.VAR_DECL, K.PARM_DECL):
            return
        if ref.semantic_parent is None or ref.semantic_parent.kind != K.FUNCTION_DECL:
            return   # globals and statics at file scope are left alone
        a, b = self.span(cursor)
        if self.src(a, b) != cursor.spelling:
            return   # inside a macro's expansion
        if parent is not None and parent.kind == K.MEMBER_REF_EXPR:
            return
        want = ref.type.get_canonical().spelling
        # the nearest earlier-declared variable of the same type, not itself
        for off, name, typ in reversed(self.locals):
            if off < a and name != cursor.spelling and typ == want:
                self.add(self.function, "var_replace", a, b, name, cursor.extent.start.line)
                return

    def ret(self, cursor, parent):
        children = list(cursor.get_children())
        if len(children) != 1 or not self.in_file(children[0]):
            return
        expr = children[0]
        a, b = self.span(expr)
        text = self.src(a, b)
        if self.return_type == STATUS_TYPE and text.strip() != "GAAW_SUCCESS":
            self.add(self.function, "return_ok", a, b, "GAAW_SUCCESS", expr.extent.start.line)
        elif self.return_type == "int" and (text.strip() == "-1" or text.replace(" ", "").endswith(",-1")):
            self.add(self.function, "return_ok", a, b, "0", expr.extent.start.line)

    def call(self, cursor, parent):
        if parent is None or parent.kind == K.COMPOUND_STMT:
            return   # its status is not used: nothing to ignore
        callee = cursor.spelling
        a, b = self.span(cursor)
        text = self.src(a, b)
        if not text.startswith(callee) or not text.endswith(")"):
            return
        rtype = cursor.type.spelling
        if rtype == STATUS_TYPE:
            success = "GAAW_SUCCESS"
        elif callee in INT_STATUS_CALLS or callee.startswith("MPI_"):
            success = "0"
        else:
            return
        if parent.kind == K.RETURN_STMT and rtype == STATUS_TYPE:
            return   # return_ok covers it
        self.add(self.function, "ignore_status", a, b, "((void)%s, %s)" % (text, success),
                 cursor.extent.start.line)

    def maybe_delete(self, cursor):
        kind = cursor.kind
        deletable = kind == K.CALL_EXPR or kind == K.COMPOUND_ASSIGNMENT_OPERATOR
        if kind == K.BINARY_OPERATOR:
            toks = [t.spelling for t in cursor.get_tokens()]
            deletable = "=" in toks
        if kind == K.UNARY_OPERATOR:
            toks = [t.spelling for t in cursor.get_tokens()]
            deletable = "++" in toks or "--" in toks
        if not deletable:
            return
        a, b = self.span(cursor)
        self.add(self.function, "delete_stmt", a, b, "(void)0", cursor.extent.start.line)


_HANDLERS = {
    K.IF_STMT: _Walker.condition, K.WHILE_STMT: _Walker.condition, K.DO_STMT: _Walker.condition,
    K.FOR_STMT: _Walker.condition, K.CONDITIONAL_OPERATOR: _Walker.condition,
    K.BINARY_OPERATOR: _Walker.binary, K.COMPOUND_ASSIGNMENT_OPERATOR: _Walker.binary,
    K.INTEGER_LITERAL: _Walker.integer,
    K.DECL_REF_EXPR: _Walker.decl_ref,
    K.RETURN_STMT: _Walker.ret,
    K.CALL_EXPR: _Walker.call,
}


def generate(rel, path, clang_args):
    """Every mutant of one file (rel: its path in the tree, the key's first field)."""
    _init_libclang()
    index = cindex.Index.create()
    tu = index.parse(path, args=clang_args)
    errors = [d for d in tu.diagnostics if d.severity >= cindex.Diagnostic.Error]
    if errors:
        raise RuntimeError("%s: libclang cannot parse it: %s" % (rel, errors[0].spelling))
    with open(path, "rb") as f:
        data = f.read()
    walker = _Walker(rel, path, data, tu)
    mutants = walker.walk_functions()
    # one mutant per place and text; occurrences numbered in source order
    seen, unique = set(), []
    for m in sorted(mutants, key=lambda m: (m.offset, m.op, m.replacement)):
        ident = (m.offset, m.length, m.replacement)
        if ident in seen:
            continue
        seen.add(ident)
        unique.append(m)
    counts = {}
    for m in unique:
        k = (m.function, m.op, " ".join(m.original.split()))
        m.occurrence = counts.get(k, 0)
        counts[k] = m.occurrence + 1
    return unique
