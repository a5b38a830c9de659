"""``python -m llama_index_e2rag.cli``: the ``e2rag`` command."""

import sys

from llama_index_e2rag.cli.entry import main

sys.exit(main())
