from lineage.cli import app

app()
