print("hello from the tool")
