def verify_task_completion(initial_db_path, final_db_path, final_answer):
    import sqlite3
    after = sqlite3.connect(final_db_path)
    loans = after.execute(
        "SELECT COUNT(*) FROM loans JOIN books ON books.id = loans.book_id "
        "WHERE books.title = 'Dune' AND loans.user_id = 1 AND loans.returned = 0").fetchone()[0]
    available = after.execute("SELECT available FROM books WHERE title = 'Dune'").fetchone()[0]
    return {"result": "complete" if loans == 1 and not available else "others"}
