"""Where the workbench leans on other packages' private API: one module per family, so an upgrade that breaks one
has one place to look (`transformers.py`: transformers, trl, datasets)."""
