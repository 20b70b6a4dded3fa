export const DEFAULT_NAMESPACE = "ChoriaProvisioner";
