"""Ratings of answers and what they tell the docs team.

    store.py      the records (AnswerRecord, Rating, RatedAnswer) and the FeedbackStore protocol every backend meets
    sql.py        the queries, once for both engines (a placeholder and table names are all that differ)
    sqlite.py     SqliteFeedbackStore: CITEWISE_HOME/feedback.sqlite3 (the embedded default), its schema
    postgres.py   PostgresFeedbackStore: the database's tables when `store = "postgres"` (migration 3)
    analytics.py  the report behind `citewise gaps` and GET /api/analytics: unanswered questions, answers marked
                  bad, refusals by reason, answer rate over time — per owner

A server keeps every answer it gives (with the owner, the docs version and the citations) so a rating always points
at what was really answered; a rating is accepted only from the owner the answer was given to.
"""

from citewise.feedback.store import AnswerRecord, FeedbackStore, RatedAnswer, Rating, open_feedback_store

__all__ = ["AnswerRecord", "FeedbackStore", "RatedAnswer", "Rating", "open_feedback_store"]
