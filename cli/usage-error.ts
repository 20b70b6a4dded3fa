/** A mistake on the command line: the CLI says it in one line with where the help is, and exits 2. */
import { ProvisionerError } from "../lib/errors";

export class UsageError extends ProvisionerError {}
