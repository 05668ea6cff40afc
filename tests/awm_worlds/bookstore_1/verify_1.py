def verify_task_completion(initial_db_path, final_db_path, final_answer):
    import re
    import sqlite3
    count = sqlite3.connect(initial_db_path).execute(
        "SELECT COUNT(*) FROM books WHERE author = 'Ursula K. Le Guin'").fetchone()[0]
    numbers = re.findall(r"\d+", final_answer or "")
    words = {1: "one", 2: "two", 3: "three", 4: "four"}
    if str(count) in numbers or words.get(count, "?") in (final_answer or "").lower():
        return {"result": "complete"}
    return {"result": "others"}
