def verify_task_completion(initial_db_path, final_db_path, final_answer):
    import sqlite3
    after = sqlite3.connect(final_db_path)
    found = after.execute(
        "SELECT COUNT(*) FROM reviews JOIN books ON books.id = reviews.book_id "
        "WHERE books.title = 'Emma' AND reviews.user_id = 1 AND reviews.stars = 5 AND reviews.text = 'Lovely'"
    ).fetchone()[0]
    return {"result": "complete" if found == 1 else "others"}
