/**
 * Imported for its effect, first of all imports, by every entry point of the local stack. Powertools
 * reads POWERTOOLS_METRICS_DISABLED once, when its Metrics instance is built, and that instance is
 * built as soon as any function module loads (each builds its handler at import, and create-app
 * imports them all). Set later, the switch is ignored and every invocation prints its
 * EMF JSON on stdout, through the live progress line. A caller that set it (to see the EMF) keeps it.
 */
process.env.POWERTOOLS_METRICS_DISABLED ??= "true";

export {};
