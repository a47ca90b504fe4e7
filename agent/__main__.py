"""`python -m agent`: run the agent (same as `wingsmith agent`)."""

from agent.main import main

main()
