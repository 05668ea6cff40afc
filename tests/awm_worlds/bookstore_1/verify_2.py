def verify_task_completion(initial_db_path, final_db_path, final_answer):
    import sqlite3
    after = sqlite3.connect(final_db_path)
    mine = after.execute("SELECT status FROM orders WHERE id = 1").fetchone()[0]
    theirs = after.execute("SELECT status FROM orders WHERE id = 2").fetchone()[0]
    if mine == "cancelled" and theirs == "pending":
        return {"result": "complete"}
    return {"result": "others"}
