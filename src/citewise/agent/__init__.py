"""The grounded question-answering agent: a bounded LangGraph loop that answers only from retrieved passages."""
