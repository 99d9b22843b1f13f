"""The import graph has no arrow running back up the pipeline (issue 34, item 22): the command line sits on
top, the runtimes beside it, and the stages below do not reach up into later stages.  Imports inside functions
count too (ast.walk sees them)."""

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: Modules every layer may import: no imports of the project beyond each other.
BASE = {"errors", "numeric", "interrupt", "vocabulary", "options", "progress", "files", "launcher"}
#: package (prefix) -> the project packages it may not import, and why.
FORBIDDEN = {
    "runtimes": ({"cli", "commands"}, "the runtimes are below the command line: a2a_compiler.launcher is shared"),
    "a2a_compiler.demand": (None, "an input of every stage: it imports the base modules only"),
    "a2a_compiler.topology": (None, "the first stage: it imports the base modules only"),
    "a2a_compiler.solve": ({"chunk", "lower", "verify", "formats", "compiler", "jobs", "cli", "commands"},
                           "the solvers come before chunking, lowering and verifying"),
    "a2a_compiler.chunk": ({"lower", "verify", "compiler", "jobs", "cli", "commands"},
                           "chunking comes before lowering and verifying"),
}


def _imports(path: Path, module: str) -> set[str]:
    """The absolute names ``path`` imports (relative imports resolved), anywhere in it."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            names.update([target] if node.module else [f"{target}.{a.name}" for a in node.names])
    return names


def _modules():
    for root in ("a2a_compiler", "runtimes"):
        for path in sorted((REPO / root).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            yield path, ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_import_runs_back_up():
    wrong = []
    for path, module in _modules():
        stage = module.split(".")[1] if module.startswith("a2a_compiler.") else None
        for name in _imports(path, module):
            parts = name.split(".")
            if parts[0] != "a2a_compiler" or len(parts) < 2 or parts[1] == stage:
                continue
            target = parts[1]
            if target in ("cli", "commands") and stage not in ("cli", "commands", "__main__"):
                wrong.append(f"{module} imports {name}: only the command line imports it")
            for prefix, (banned, why) in FORBIDDEN.items():
                if (module == prefix or module.startswith(prefix + ".")) and \
                        (target in banned if banned is not None else target not in BASE):
                    wrong.append(f"{module} imports {name}: {why}")
    assert wrong == []
