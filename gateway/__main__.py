"""``python -m gateway`` and the ``confer`` command: the command line, loaded with the cyclic
garbage collector paused.

Loading the command line (the app, its routes and models: about 190,000 objects that live as
long as the process) makes the collector run a few hundred times, each pass walking
everything loaded so far: about a sixth of ``confer serve``'s time to its first healthy
answer. It is paused while they load, then they are moved to the permanent generation
(:func:`gc.freeze`), so that no later pass walks them either, and it runs as usual from then
on. The few hundred objects that became garbage while loading (under half a MB) stay.
"""

from __future__ import annotations

import gc


def main() -> None:
    """Run the ``confer`` command line (:func:`gateway.cli.main`)."""
    gc.disable()
    try:
        from gateway.cli import main as cli_main
    finally:
        gc.freeze()
        gc.enable()
    cli_main()


if __name__ == "__main__":
    main()
