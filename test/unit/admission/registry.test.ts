import { MemoryAdmissionStore } from "../../../lib/admission/memory-admission-store";
import { describeRegistryRules } from "./registry-rules";

describeRegistryRules("the in-memory store", () => new MemoryAdmissionStore());
