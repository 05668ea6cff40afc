def verify_task_completion(initial_db_path, final_db_path, final_answer):
    import sqlite3
    after = sqlite3.connect(final_db_path)
    done = after.execute("SELECT done FROM tasks WHERE title = 'Buy milk' AND user_id = 1").fetchone()[0]
    others = after.execute("SELECT COUNT(*) FROM tasks WHERE done = 1").fetchone()[0]
    if done and others == 2:
        return {"result": "complete"}
    return {"result": "others"}
