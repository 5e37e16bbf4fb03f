"""Commands added by later layers (attribution, finetune, regression, app). One line each."""

COMMANDS_EXTRA: dict[str, str] = {
    "preflight": "finetune.commands.preflight",
    "index": "workbench.cli.index",
}
