"""A small labeled query file on the bundled FastAPI docs, shared by the command-line and study tests."""

QUERIES = """id,query,answerable,slice,gold
q1,How can I put a cookie in the response?,true,answerable,advanced/response-cookies.md
q2,How do I let a browser frontend on another domain call my API?,true,answerable,tutorial/cors.md
q3,How can I send an email after the request has finished?,true,answerable,tutorial/background-tasks.md
q4,How do I get the user that is logged in from the token?,true,answerable,tutorial/security/get-current-user.md
q5,What is the best way to caramelise onions?,false,unrelated,
q6,How many players are on a cricket team?,false,unrelated,
q7,Which wine goes with roast lamb?,false,unrelated,
"""
