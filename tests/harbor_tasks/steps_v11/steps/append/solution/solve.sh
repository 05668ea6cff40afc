echo second >> notes.txt
