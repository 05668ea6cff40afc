def verify_task_completion(initial_db_path, final_db_path, final_answer):
    import sqlite3
    before = sqlite3.connect(initial_db_path)
    after = sqlite3.connect(final_db_path)
    stock_before = before.execute("SELECT stock FROM books WHERE title = 'Dune'").fetchone()[0]
    stock_after = after.execute("SELECT stock FROM books WHERE title = 'Dune'").fetchone()[0]
    orders = after.execute(
        "SELECT COUNT(*) FROM orders o JOIN books b ON o.book_id = b.id "
        "WHERE o.user_id = 1 AND b.title = 'Dune' AND o.quantity = 2 AND o.status = 'pending'").fetchone()[0]
    orders_before = before.execute(
        "SELECT COUNT(*) FROM orders o JOIN books b ON o.book_id = b.id WHERE b.title = 'Dune'").fetchone()[0]
    if orders == orders_before + 1 and stock_after == stock_before - 2:
        return {"result": "complete"}
    return {"result": "others"}
