def verify_task(initial_db_path, final_db_path):
    import sqlite3
    query = "SELECT done FROM tasks WHERE title = 'Buy milk' AND user_id = 1"
    before = sqlite3.connect(initial_db_path).execute(query).fetchone()[0]
    after = sqlite3.connect(final_db_path).execute(query).fetchone()[0]
    return {"buy_milk_done_before": bool(before), "task_done": bool(after)}
