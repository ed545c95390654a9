"""The harness's self-tests use its own plugin (which marks everything under e2e/ `e2e`)."""

pytest_plugins = ["testenv.pytest_plugin"]
