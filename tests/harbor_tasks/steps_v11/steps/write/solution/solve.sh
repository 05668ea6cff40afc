echo first > notes.txt
