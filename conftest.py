"""Root conftest: test-suite plugins. The rlaudit plugin itself loads via its entry point."""

pytest_plugins = ["pytester"]
