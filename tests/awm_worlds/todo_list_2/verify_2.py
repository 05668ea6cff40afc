def verify_task_completion(initial_db_path, final_db_path, final_answer):
    import sqlite3
    after = sqlite3.connect(final_db_path)
    found = after.execute(
        "SELECT COUNT(*) FROM tasks t JOIN projects p ON t.project_id = p.id "
        "WHERE t.title = 'Call mom' AND p.name = 'Family' AND t.user_id = 1 AND t.done = 0").fetchone()[0]
    return {"result": "complete" if found == 1 else "others"}
