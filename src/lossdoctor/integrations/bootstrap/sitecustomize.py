"""Put first on PYTHONPATH by `lossdoctor run`: Python imports it at start-up, before the script.

With `LOSSDOCTOR_ATTACH=1` it installs lossdoctor's hooks (`lossdoctor.integrations.attach`), which
wait for the script to import torch. Then it runs the `sitecustomize` this one shadows, if any.
Nothing here may stop the script: every failure is one line on stderr.
"""

import os
import sys


def _attach():
    if os.environ.get("LOSSDOCTOR_ATTACH") != "1":
        return
    root = os.environ.get("LOSSDOCTOR_PKG_ROOT")
    if root and root not in sys.path:
        sys.path.append(root)  # the lossdoctor that started the run, when it is not installed here
    try:
        from lossdoctor.integrations.attach import install

        install()
    except Exception as e:
        print(f"lossdoctor: note: could not watch this run ({type(e).__name__}: {e})", file=sys.stderr)


def _chain():
    """Run the next `sitecustomize` on the path (a site's or a virtual environment's own)."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_attach()
try:
    _chain()
except Exception as e:
    print(f"lossdoctor: note: the site's own sitecustomize failed ({type(e).__name__}: {e})", file=sys.stderr)
