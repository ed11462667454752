"""Runnable examples of the integrations with local fake models: a LangGraph graph, a LangChain
agent with our middleware, an OpenAI Agents session. The demo runs them and the tests drive them;
they need the matching optional extras."""
