from vulnapi import create_app

app = create_app()
