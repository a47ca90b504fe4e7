"""`python -m agent`: run the agent (same as `wingsmith agent`)."""

from agent.app import main

main()
