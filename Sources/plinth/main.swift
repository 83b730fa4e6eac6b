print("plinth")
