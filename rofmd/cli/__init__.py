"""The command line: `rofmd` and one module per command family (`main` parses and
routes; the `*_cli` modules and the operator's tools share `where`)."""
