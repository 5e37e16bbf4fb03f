"""The app's tabs, one module each: `decisions` (the first screen: the decision queue), `runs`, `compare`, `detail`
(probe detail), `fix`, `review`, `reports`; `tabs.TABS` lists them in the page's order.

Each module has one function, `<name>_tab(ctx, shared)`, that lays out its components inside the caller's
`gr.Tabs` and binds its events; its handlers are methods of a frozen dataclass of the tab's components and return
updates keyed by component (`{component: value}`), never positional tuples. What one tab reads or writes in another
travels in `common.Shared`, passed explicitly. `app.py` only assembles the tabs, logins and the launch.

Layer: above `finetune` and `workbench` (it may import both), below `app.py`; nothing in `finetune` or `workbench`
imports it. Gradio is imported at the top of these modules (their handlers' annotations, `gr.Request` and
`gr.SelectData`, are read by gradio at wiring time), so only `app.build_app` imports this package.
"""
