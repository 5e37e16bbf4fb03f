"""The Hallucination Workbench app: `python app.py [--workspace DIR] [--host 127.0.0.1] [--port N] [--auth-file FILE]`.

The tabs, logins and launch only: each tab is a module of `apptabs` (widgets, wiring and thin handlers over plain
functions of `workbench` and `finetune`, tested without gradio); each action shows its equivalent CLI command.

Security: binds 127.0.0.1 by default; any other host needs `--auth-file` (hashed passwords, see
`workbench.auth`) or the app refuses to start; never `share=True`; serves no file outside the
workspace (gradio's cache lives in it, user paths go through `workbench.safepath`, which also refuses the
store's own files); runs no shell. The page layout holds nothing from the workspace (run ids arrive with
the first load, after login), and before login the page carries no API description either.
"""

# gradio and the tabs are imported inside build_app so that `workbench --help` stays light.
import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def build_app(workspace: str | Path) -> Any:
    """The gr.Blocks of the app over one workspace: the tabs of `apptabs`, one module each, in the page's order
    (`apptabs.tabs.TABS`)."""
    import gradio as gr

    from apptabs.common import Context, shared_components
    from apptabs.tabs import TABS
    from workbench.store import Store

    ctx = Context(Store.open(workspace))
    with gr.Blocks(title="Hallucination Workbench", analytics_enabled=False) as demo:
        header = gr.Markdown("## Hallucination Workbench")
        with gr.Tabs() as tabs:
            shared = shared_components(demo, tabs)
            for tab in TABS:  # the Decisions tab first: the page opens on the gates awaiting a decision
                tab(ctx, shared)
        demo.load(lambda: f"## Hallucination Workbench · workspace `{ctx.ws}`", None, header, api_name="header",
                  api_visibility="private")  # after login: the layout holds nothing from the workspace
    return demo


def check_bind(host: str, auth_file: str | None) -> None:
    """Refuse to bind beyond loopback without a users file (WorkbenchError)."""
    from workbench.errors import WorkbenchError
    if host not in LOOPBACK and not auth_file:
        raise WorkbenchError(f"refusing to bind {host}: beyond loopback the app needs --auth-file FILE "
                             "(add a user with `workbench app --add-user NAME --auth-file FILE`)")


#: The app takes no file from its users (every input is typed): gradio's upload route is capped all the same, as
#: its advisories on file routes advise (unlimited by default: 200 MB went through).
MAX_UPLOAD = "1mb"


def launch(workspace: str | Path, *, host: str = "127.0.0.1", port: int | None = None,
           auth_file: str | None = None, prevent_thread_lock: bool = False, quiet: bool = False) -> tuple[Any, str]:
    """Build and launch the app; returns (blocks, local url). Raises WorkbenchError on an unsafe bind."""
    check_bind(host, auth_file)
    ws = Path(workspace).resolve()
    ws.mkdir(parents=True, exist_ok=True)
    # gradio's upload/output cache inside the workspace, so even its own files are served from there.
    os.environ.setdefault("GRADIO_TEMP_DIR", str(ws / ".gradio"))
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    auth = None
    if auth_file:
        from workbench.auth import authenticator
        auth = authenticator(auth_file)
    demo = build_app(ws)
    from starlette.middleware import Middleware

    from apptabs import assets
    from apptabs.launching import launch_checked
    from workbench.appguard import LoginOnlyRoutes, LoginThrottle, NoApiInfoBeforeLogin

    # No FastAPI schema (/openapi.json lists every route, unauthenticated), no API description and no heartbeat
    # stream before login; failed sign-ins slow the next ones down, per user and per client address.
    app_kwargs = {"openapi_url": None, "middleware": [Middleware(NoApiInfoBeforeLogin), Middleware(LoginOnlyRoutes),
                                                      Middleware(LoginThrottle)]}
    url = launch_checked(demo, server_name=host, server_port=port, share=False, auth=auth, allowed_paths=[],
                         prevent_thread_lock=prevent_thread_lock, quiet=quiet, show_error=True, ssr_mode=False,
                         mcp_server=False, max_file_size=MAX_UPLOAD, js=assets.KEYS_JS, css=assets.CSS,
                         footer_links=["api"], app_kwargs=app_kwargs,
                         auth_message="Hallucination Workbench: sign in" if auth else None)
    return demo, url


def add_arguments(p: argparse.ArgumentParser, *, workspace: bool = True) -> None:
    if workspace:
        p.add_argument("--workspace", default=os.environ.get("WORKBENCH_WORKSPACE", ".workbench"),
                       help="workspace directory holding the store (default: $WORKBENCH_WORKSPACE or ./.workbench)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; others need --auth-file)")
    from workbench.cli import bounded
    p.add_argument("--port", type=bounded(1, 65_535), default=None,
                   help="port, 1-65535 (default: gradio's, 7860 or the next free one)")
    p.add_argument("--auth-file", help="users file (`username:pbkdf2_sha256$...` lines); required beyond loopback")
    p.add_argument("--add-user", metavar="NAME", help="add NAME to --auth-file (password from "
                   "$WORKBENCH_PASSWORD or a prompt) and exit")


def run(args: argparse.Namespace) -> int:
    """Shared by `python app.py` and `workbench app`. 0 ok, 2 refused or bad input."""
    from workbench.errors import WorkbenchError
    from workbench.logconfig import resolve_level, setup_logging
    try:
        setup_logging(resolve_level())  # again under `workbench app`; `python app.py` is an entry point of its own
        if args.add_user is not None:
            if not args.auth_file:
                raise WorkbenchError("--add-user needs --auth-file FILE")
            from workbench.auth import add_user
            password = os.environ.get("WORKBENCH_PASSWORD")
            if password is None:
                if not sys.stdin.isatty():
                    raise WorkbenchError("--add-user needs a password: set $WORKBENCH_PASSWORD, or run it in a "
                                         "terminal to be prompted")
                import getpass
                try:
                    password = getpass.getpass(f"password for {args.add_user}: ")
                except EOFError:
                    raise WorkbenchError("no password given (end of input)") from None
            add_user(args.auth_file, args.add_user, password)
            print(f"added {args.add_user} to {args.auth_file}")
            return 0
        # Quiet: gradio's banner also tells the user to set `share=True`, which would publish the workspace on a
        # public tunnel (this app never does); the local URL, the one line worth printing, is printed here.
        demo, url = launch(args.workspace, host=args.host, port=args.port, auth_file=args.auth_file,
                           prevent_thread_lock=True, quiet=True)
        print(f"* Running on local URL:  {url}", flush=True)
        demo.block_thread()
    except WorkbenchError as e:
        from workbench.printable import printable
        print(f"error: {printable(e, lines=True)}", file=sys.stderr)
        return 2
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python app.py", description="The Hallucination Workbench web app.")
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
