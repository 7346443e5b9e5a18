"""The ``agentica`` command line: ``agentica run`` streams a run to the terminal."""
