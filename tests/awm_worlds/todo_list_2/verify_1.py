def verify_task_completion(initial_db_path, final_db_path, final_answer):
    import re
    import sqlite3
    count = sqlite3.connect(initial_db_path).execute(
        "SELECT COUNT(*) FROM tasks t JOIN projects p ON t.project_id = p.id "
        "WHERE p.name = 'Home' AND p.user_id = 1 AND t.done = 0").fetchone()[0]
    if str(count) in re.findall(r"\d+", final_answer or ""):
        return {"result": "complete"}
    return {"result": "others"}
