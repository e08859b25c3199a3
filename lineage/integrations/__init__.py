"""Framework hooks that record lineage without OpenTelemetry: LangChain, LlamaIndex."""
