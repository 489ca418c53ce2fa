/** Who a request acts for, once its API key was checked: every service call and resolver scopes by it. */
export interface Auth {
  projectId: string;
  apiKeyId: string;
}
