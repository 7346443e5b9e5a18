"""``python -m agentica.testing --responder module:function``: run the scripted OpenAI server."""

from agentica.testing.openai_server import main

main()
