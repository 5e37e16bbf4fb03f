"""Commands added by later layers (attribution, finetune, regression, app). One line each."""

COMMANDS_EXTRA: dict[str, str] = {
    "fix": "finetune.commands.fix",
    "train": "finetune.commands.train",
    "preflight": "finetune.commands.preflight",
    "index": "workbench.cli.index",
    "attribute": "workbench.cli.attribute",
    "screen": "workbench.cli.screen",
    "review": "workbench.cli.review",
    "app": "finetune.commands.app",
}
